// The cap on a listener's open connections (CPS_MAX_CONNECTIONS, operations/descriptors.ts). A
// connection past the cap is answered, not reset: its first request gets 503 `service_unavailable`
// with Retry-After, written here without the app (whose handlers may need a descriptor the cap
// keeps for the database), unless it asks for /healthz, /readyz or /metrics, which are served as
// usual; either way the connection is then closed. Node's own `server.maxConnections` would
// destroy such a connection silently.
//
// const cap = new ConnectionCap(limits, logger);
// http.createServer(cap.guard(listener)); cap.attach(server);
import { randomUUID } from 'node:crypto';
import type { RequestListener, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../operations/log.js';
import type { ConnectionLimits } from '../operations/descriptors.js';
import { ProblemError } from '../shared/problem.js';
import { toProblem } from './errors.js';
import { SANE_REQUEST_ID } from './request-id.js';

/** What a refused client is told to wait: about what a stream or export takes to end somewhere. */
export const CONNECTIONS_RETRY_AFTER_SECONDS = 10;

/** An overflow connection that sends no request within this long is closed (it holds a reserved descriptor). */
const OVERFLOW_IDLE_MS = 5000;

/** Answered on a connection past the cap: the platform's probes and scrapes still reach a full process. */
const OPERATIONS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

export class ConnectionCap {
  private capped = 0;
  private overflowing = 0;
  private readonly overflow = new WeakSet<Socket>();
  private full = false;
  constructor(
    readonly limits: ConnectionLimits,
    private readonly logger: Logger,
    /** Told of each connection refused (503, or closed past the overflow): cps_http_connections_refused_total. */
    private readonly onRefused: () => void = () => {},
  ) {}

  /** Connections the listener holds now, those being answered past the cap included. */
  get open(): number {
    return this.capped + this.overflowing;
  }

  /** Counts the server's connections as they open and close. */
  attach(server: Server): void {
    server.on('connection', (socket: Socket) => this.admit(socket));
  }

  /** The request listener, with the overflow's first request answered here. */
  guard(listener: RequestListener): RequestListener {
    return (request, response) => {
      if (!this.overflow.has(request.socket)) return listener(request, response);
      response.setHeader('Connection', 'close');
      const path = (request.url ?? '/').split('?')[0]!;
      if (request.method === 'GET' && OPERATIONS_PATHS.has(path)) return listener(request, response);
      this.onRefused();
      const incoming = request.headers['x-request-id'];
      const requestId = typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
      const problem = new ProblemError(
        'service_unavailable',
        `This process holds its maximum of ${this.limits.maxConnections} connections; retry after ${CONNECTIONS_RETRY_AFTER_SECONDS} seconds.`,
      );
      response.writeHead(503, {
        'Content-Type': 'application/problem+json',
        'Retry-After': String(CONNECTIONS_RETRY_AFTER_SECONDS),
        'X-Request-Id': requestId,
      });
      response.end(JSON.stringify(toProblem(problem, path)));
    };
  }

  private admit(socket: Socket): void {
    if (this.capped < this.limits.maxConnections) {
      this.capped += 1;
      socket.once('close', () => {
        this.capped -= 1;
        this.full = false;
      });
      return;
    }
    if (!this.full) {
      this.full = true;
      this.logger.warn(this.limits, 'connections at their cap: new ones are answered 503 until some close');
    }
    if (this.overflowing >= this.limits.overflowConnections) {
      // Past the overflow too: closed before it takes a descriptor the database or the spool needs.
      this.onRefused();
      socket.destroy();
      return;
    }
    this.overflowing += 1;
    this.overflow.add(socket);
    const idle = setTimeout(() => socket.destroy(), OVERFLOW_IDLE_MS);
    idle.unref();
    socket.once('close', () => {
      this.overflowing -= 1;
      clearTimeout(idle);
    });
  }
}
