// The PostgreSQL server for the engine's own tests (postgres.test.ts, the PostgreSQL dispatch and
// mirror tests): the one the postgres project's globalSetup started (test/support/postgres.ts), on
// which each test creates empty databases of its own (its migrations are what it tests).
import pg from 'pg';
import { testPostgres } from '../support/postgres.js';

export interface TestPostgres {
  url: string;
  /** A URL for a new, empty database on this server. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

export async function startTestPostgres(): Promise<TestPostgres> {
  const provided = testPostgres();
  if (provided.kind !== 'server') throw new Error(`these tests need a PostgreSQL server (${provided.reason})`);
  const { url } = provided;
  return {
    url,
    async createDatabase(name) {
      // Test files run in parallel on one server: the database names carry the worker's pid.
      const database = `${name}_${process.pid}`;
      const client = new pg.Client(url);
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${database}"`);
      } finally {
        await client.end();
      }
      return url.replace(/\/[^/]*$/, `/${database}`);
    },
    // The server is the run's; it stops when the run ends.
    stop: async () => {},
  };
}
