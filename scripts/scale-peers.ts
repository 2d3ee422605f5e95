// The service's peers in `npm run bench:scale`, in a child process of their own (so serving images
// and receiving webhooks never delays the bench's own reader): on 127.0.0.1 only,
// - the image origin: one port answering every GET with a small valid JPEG, different bytes per
//   path (`/p/...`), or 404 for `/gone/...`; every image of the catalog is on this one origin;
// - the hanging origin: a second port that accepts every request and never answers (a supplier
//   host that hangs: the mirror's time-out has to end each fetch);
// - the webhook receivers: a third port answering every POST with 200 at once, counted per path
//   (each endpoint of the bench has a path of its own, so it is a receiver of its own).
// IPC: sends {ports} once listening; answers 'counts' with {images, hangs, deliveries, byPath}.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { jpegOf } from '../test/support/image-server.js';

let images = 0;
let gone = 0;
let hangs = 0;
let deliveries = 0;
const byPath = new Map<string, number>();

const origin = http.createServer((request, response) => {
  request.resume();
  const url = request.url ?? '/';
  if (url.startsWith('/gone/')) {
    gone++;
    response.writeHead(404, { 'Content-Type': 'text/plain' }).end('gone');
    return;
  }
  images++;
  const body = jpegOf(url);
  response.writeHead(200, { 'Content-Type': 'image/jpeg', 'Content-Length': body.length, 'Cache-Control': 'max-age=86400' }).end(body);
});
origin.keepAliveTimeout = 60_000;

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
  if (message === 'counts') process.send?.({ images, gone, hangs, deliveries, byPath: Object.fromEntries(byPath) });
});
process.on('disconnect', () => process.exit(0));

const [originPort, hangPort, receiverPort] = await Promise.all([listen(origin), listen(hanging), listen(receiver)]);
process.send?.({ ports: { origin: originPort, hang: hangPort, receiver: receiverPort } });
