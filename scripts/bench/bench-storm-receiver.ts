// The limited endpoint's receiver of `npm run bench:storm`, in a process of its own so that its
// arrival times are not delayed by the bench's own work: notes each request's arrival (when its
// headers came), webhook-id and product ids, answers 204, and reports them over IPC.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const arrivals: { at: number; id: string; ids: number[] }[] = [];
const ids = new Set<number>();
const server = http.createServer((request, response) => {
  const at = performance.timeOrigin + performance.now();
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    response.writeHead(204).end();
    const payload = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { product_ids: number[] };
    arrivals.push({ at, id: String(request.headers['webhook-id']), ids: payload.product_ids });
    for (const id of payload.product_ids) ids.add(id);
  });
});
server.keepAliveTimeout = 60_000;
process.on('message', (message) => {
  if (message === 'count') process.send?.({ count: ids.size, deliveries: arrivals.length });
  if (message === 'report') process.send?.({ arrivals });
});
server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
