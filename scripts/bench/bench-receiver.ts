// The receiver side of `npm run bench:webhooks`: a keep-alive HTTP server on 127.0.0.1 that
// acknowledges every POST with 204 and counts them.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

let received = 0;
const server = http.createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    received++;
    response.writeHead(204).end();
  });
});
server.keepAliveTimeout = 60_000;
process.on('message', (message) => {
  if (message === 'count') process.send?.({ received });
});
server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
