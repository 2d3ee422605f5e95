// A real supplier image host for the mirroring tests: a node:http server on 127.0.0.1 (port 0)
// that serves small valid PNGs and JPEGs, 404s, 410s, 500s, responses too slow or too large for the
// mirror's limits, wrong content types (HTML, SVG) and redirects. Every path can be switched to
// another behaviour between fetches (failing, then serving), and every request is counted, so a
// test can tell that something was never fetched, and how many requests were open at once.
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import zlib from 'node:zlib';

/** How the server answers a GET of one path. */
export type ImageBehaviour =
  /** 200 with a 1x1 PNG whose colour derives from `name` (so different names, different bytes). */
  | { png: string }
  /** 200 with a 1x1 baseline JPEG carrying `name` in a comment (different names, different bytes). */
  | { jpeg: string }
  /** This status with a short text body (404, 410, 500, ...). */
  | { status: number }
  /** A redirect to another path of this server (the mirror must not follow it). */
  | { redirect: string }
  /** Never answers: the mirror's time-out must end the request. */
  | 'hang-before-headers'
  /** Sends the headers and the first bytes of an image, then stalls (a body that never completes). */
  | 'stall-body'
  /** 200 `image/png` with `bytes` bytes, announced in Content-Length (`declared`) or chunked (not). */
  | { oversized: number; declared: boolean }
  /** 200 with this content type and body (text/html, image/svg+xml, ... or bytes under another label). */
  | { contentType: string; body: string | Buffer };

/** A 1x1 RGB PNG of one colour. */
export function pngOf(name: string): Buffer {
  const [r, g, b] = createHash('sha256').update(name).digest();
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(Buffer.concat([Buffer.from(type, 'ascii'), data])) >>> 0);
    return Buffer.concat([length, Buffer.from(type, 'ascii'), data, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(1, 0); // width
  header.writeUInt32BE(1, 4); // height
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB, deflate, no filter method, no interlace
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', zlib.deflateSync(Buffer.from([0, r!, g!, b!]))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/**
 * A 1x1 mid-grey baseline JPEG: one 8x8 block whose DC difference and AC coefficients are all zero,
 * coded with one-symbol Huffman tables (a single `0` bit each), and `name` in a COM segment.
 */
export function jpegOf(name: string): Buffer {
  const segment = (marker: number, data: number[] | Buffer) => {
    const body = Buffer.from(data);
    return Buffer.concat([Buffer.from([0xff, marker, (body.length + 2) >> 8, (body.length + 2) & 0xff]), body]);
  };
  const oneSymbolTable = (tableClass: number) => [tableClass << 4, 1, ...new Array<number>(15).fill(0), 0x00];
  return Buffer.concat([
    Buffer.from([0xff, 0xd8]), // SOI
    segment(0xe0, [...Buffer.from('JFIF\0', 'ascii'), 1, 1, 0, 0, 1, 0, 1, 0, 0]),
    segment(0xfe, Buffer.from(name, 'utf8')),
    segment(0xdb, [0, ...new Array<number>(64).fill(1)]), // DQT 0: all ones
    segment(0xc0, [8, 0, 1, 0, 1, 1, 1, 0x11, 0]), // SOF0: 8-bit, 1x1, one component, table 0
    segment(0xc4, oneSymbolTable(0)), // DC table 0: category 0
    segment(0xc4, oneSymbolTable(1)), // AC table 0: end of block
    segment(0xda, [1, 1, 0x00, 0, 63, 0]), // SOS
    Buffer.from([0x3f]), // DC `0`, EOB `0`, padded with ones
    Buffer.from([0xff, 0xd9]), // EOI
  ]);
}

/** The default behaviour of a path; `set()` overrides it. */
function defaultBehaviour(path: string): ImageBehaviour {
  let match: RegExpExecArray | null;
  if ((match = /^\/png\/(.+)\.png$/.exec(path))) return { png: match[1]! };
  if ((match = /^\/jpeg\/(.+)\.jpg$/.exec(path))) return { jpeg: match[1]! };
  if ((match = /^\/status\/(\d{3})(\/.*)?$/.exec(path))) return { status: Number(match[1]) };
  if (path.startsWith('/slow/')) return 'hang-before-headers';
  if (path.startsWith('/stall/')) return 'stall-body';
  if (path.startsWith('/huge/')) return { oversized: 64 * 1024, declared: true };
  if (path.startsWith('/huge-chunked/')) return { oversized: 64 * 1024, declared: false };
  if (path.startsWith('/html/')) return { contentType: 'text/html; charset=utf-8', body: '<!doctype html><p>Not an image</p>' };
  if (path.startsWith('/svg/')) {
    return {
      contentType: 'image/svg+xml',
      body: '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"><script>alert(1)</script></svg>',
    };
  }
  if (path.startsWith('/moved/')) return { redirect: '/png/moved.png' };
  // What is not an image, labelled as one.
  if (path.startsWith('/disguised-html/')) return { contentType: 'image/png', body: '<!doctype html><script>alert(1)</script>' };
  if (path.startsWith('/disguised-svg/')) {
    return {
      contentType: 'image/png',
      body: '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"><script>alert(1)</script></svg>',
    };
  }
  return { status: 404 };
}

export class ImageServer {
  private readonly overrides = new Map<string, ImageBehaviour>();
  private readonly counts = new Map<string, number>();
  private readonly sockets = new Set<Socket>();
  private inFlight = 0;
  /** The most requests this server had open at once. */
  maxInFlight = 0;

  /** The requests open now (a hanging one stays open until the client gives up). */
  get open(): number {
    return this.inFlight;
  }

  private constructor(
    private readonly server: http.Server,
    readonly origin: string,
  ) {}

  static async start(): Promise<ImageServer> {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const images = new ImageServer(server, `http://127.0.0.1:${port}`);
    server.on('connection', (socket) => {
      images.sockets.add(socket);
      socket.once('close', () => images.sockets.delete(socket));
    });
    server.on('request', (request, response) => images.answer(request, response));
    return images;
  }

  /** The absolute URL of a path on this server. */
  url(path: string): string {
    return `${this.origin}${path}`;
  }

  /** From now on, answers GETs of `path` this way (a switchable source: failing, then serving). */
  set(path: string, behaviour: ImageBehaviour): void {
    this.overrides.set(path, behaviour);
  }

  /** The bytes `path` serves while it serves an image. */
  bytes(path: string): Buffer {
    const behaviour = this.behaviour(path);
    if (typeof behaviour === 'object' && 'png' in behaviour) return pngOf(behaviour.png);
    if (typeof behaviour === 'object' && 'jpeg' in behaviour) return jpegOf(behaviour.jpeg);
    throw new Error(`${path} does not serve an image`);
  }

  /** How many requests `path` received. */
  hits(path: string): number {
    return this.counts.get(path) ?? 0;
  }

  /** Requests received, on every path. */
  get totalHits(): number {
    let total = 0;
    for (const n of this.counts.values()) total += n;
    return total;
  }

  async close(): Promise<void> {
    // Hanging and stalled responses are ended here: no timer outlives the server.
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve, reject) => this.server.close((error) => (error ? reject(error) : resolve())));
  }

  private behaviour(path: string): ImageBehaviour {
    return this.overrides.get(path) ?? defaultBehaviour(path);
  }

  private answer(request: http.IncomingMessage, response: http.ServerResponse): void {
    const path = new URL(request.url ?? '/', this.origin).pathname;
    this.counts.set(path, this.hits(path) + 1);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    response.once('close', () => {
      this.inFlight--;
    });
    const behaviour = this.behaviour(path);
    if (behaviour === 'hang-before-headers') return;
    if (behaviour === 'stall-body') {
      response.writeHead(200, { 'Content-Type': 'image/png', 'Content-Length': '1000' });
      response.write(pngOf('stall').subarray(0, 16));
      return;
    }
    if ('png' in behaviour || 'jpeg' in behaviour) {
      const body = 'png' in behaviour ? pngOf(behaviour.png) : jpegOf(behaviour.jpeg);
      response.writeHead(200, { 'Content-Type': 'png' in behaviour ? 'image/png' : 'image/jpeg', 'Content-Length': String(body.length) });
      response.end(body);
      return;
    }
    if ('status' in behaviour) {
      response.writeHead(behaviour.status, { 'Content-Type': 'text/plain' });
      response.end(`${behaviour.status}\n`);
      return;
    }
    if ('redirect' in behaviour) {
      response.writeHead(301, { Location: this.url(behaviour.redirect) });
      response.end();
      return;
    }
    if ('oversized' in behaviour) {
      const body = Buffer.concat([pngOf('huge'), Buffer.alloc(behaviour.oversized)]);
      response.writeHead(200, { 'Content-Type': 'image/png', ...(behaviour.declared ? { 'Content-Length': String(body.length) } : {}) });
      // Written in pieces, so an undeclared size shows only while the body streams in.
      for (let at = 0; at < body.length; at += 4096) response.write(body.subarray(at, at + 4096));
      response.end();
      return;
    }
    response.writeHead(200, { 'Content-Type': behaviour.contentType });
    response.end(behaviour.body);
  }
}
