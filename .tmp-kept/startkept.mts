// Starts a kept bench cluster (argv[2]: the bench's temp dir) and prints the URL of its cost_postgres database.
import path from 'node:path';
import { startPostgresServer } from '../scripts/postgres-server.ts';
const server = await startPostgresServer({ dir: path.join(process.argv[2]!, 'postgres'), durable: false });
console.log(server.urlOf('cost_postgres'));
