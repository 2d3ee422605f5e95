// The reference target of `npm run bench:reads`: the least a server can do to answer a
// page from the service's database, to measure the service against. Bare node:http and
// better-sqlite3 on the same file, read-only: `GET /?store=ID&from=A&to=B` answers the payloads of
// that store's products A..B as one BLOB that SQLite concatenates, in the page envelope's opening
// and closing bytes. No authentication, rate limit, ETag, request id, log or metrics. Same contract
// as bench-server.ts: {port} over IPC once listening, 'cpu' answered with process.cpuUsage().
// Usage: bench-reference-server DB
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Database from 'better-sqlite3';

const [file] = process.argv.slice(2);
if (!file) throw new Error('usage: bench-reference-server DB');
const db = new Database(file, { readonly: true, fileMustExist: true });
const page = db
  .prepare(`SELECT CAST(coalesce(group_concat(payload, ','), '') AS BLOB) FROM
  (SELECT payload FROM published_products WHERE store_id = ? AND product_id BETWEEN ? AND ? ORDER BY product_id)`)
  .pluck();
const OPEN = Buffer.from('{"data":[');
const CLOSE = Buffer.from(']}');

const server = http.createServer((req, res) => {
  const query = new URL(req.url ?? '/', 'http://reference').searchParams;
  const bytes = page.get(Number(query.get('store')), Number(query.get('from')), Number(query.get('to'))) as Buffer;
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': OPEN.length + bytes.length + CLOSE.length });
  res.end(Buffer.concat([OPEN, bytes, CLOSE]));
});
process.on('message', (message) => {
  if (message === 'cpu') process.send?.({ cpu: process.cpuUsage() });
});
server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
