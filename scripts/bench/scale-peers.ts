// The service's peers in `npm run bench:scale`, in a child process of their own (so serving images
// and receiving webhooks never delays the bench's own reader): on 127.0.0.1 only,
// - the image origin: one port answering every GET with a small valid JPEG, different bytes per
//   path (`/p/...`), or 404 for `/gone/...`: the catalog's live origin (bench:scale puts the
//   rest of its images on the demo's unresolvable host, which no request ever reaches);
// - the fresh origin: a second working origin on a port of its own (so a host of its own for the
//   service), answering as the first: the images of products imported while the catalog's hosts are
//   busy or down, counted apart;
// - the hanging origin: a second port that accepts every request and never answers (a supplier
//   host that hangs: the mirror's time-out has to end each fetch);
// - the webhook receivers: a third port answering every POST with 200 at once, counted per path
//   (each endpoint of the bench has a path of its own, so it is a receiver of its own).
// IPC: sends {ports} once listening; answers 'counts' with {images, fresh, gone, hangs, deliveries, byPath}.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { jpegOf } from '../../test/support/image-server.js';

let images = 0;
let fresh = 0;
let gone = 0;
let hangs = 0;
let deliveries = 0;
const byPath = new Map<string, number>();

const imageOrigin = (count: () => void) => {
  const server = http.createServer((request, response) => {
    request.resume();
    const url = request.url ?? '/';
    if (url.startsWith('/gone/')) {
      gone++;
      response.writeHead(404, { 'Content-Type': 'text/plain' }).end('gone');
      return;
    }
    count();
    const body = jpegOf(url);
    response.writeHead(200, { 'Content-Type': 'image/jpeg', 'Content-Length': body.length, 'Cache-Control': 'max-age=86400' }).end(body);
  });
  server.keepAliveTimeout = 60_000;
  return server;
};
const origin = imageOrigin(() => images++);
const freshOrigin = imageOrigin(() => fresh++);

const held = new Set<Socket>();
const hanging = http.createServer((request) => {
  hangs++;
  request.resume();
  // Never answered: the socket stays open until the client gives up (or this process ends).
  held.add(request.socket);
  request.socket.once('close', () => held.delete(request.socket));
});

const receiver = http.createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    deliveries++;
    const path = request.url ?? '/';
    byPath.set(path, (byPath.get(path) ?? 0) + 1);
    response.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok');
  });
});
receiver.keepAliveTimeout = 60_000;

const listen = (server: http.Server) =>
  new Promise<number>((resolve, reject) => {
    server.once('error', reject).listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });

process.on('message', (message) => {
  if (message === 'counts') process.send?.({ images, fresh, gone, hangs, deliveries, byPath: Object.fromEntries(byPath) });
});
process.on('disconnect', () => process.exit(0));

const [originPort, hangPort, receiverPort, freshPort] = await Promise.all([
  listen(origin),
  listen(hanging),
  listen(receiver),
  listen(freshOrigin),
]);
process.send?.({ ports: { origin: originPort, hang: hangPort, receiver: receiverPort, fresh: freshPort } });
