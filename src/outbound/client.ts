// The one guarded HTTP client for everything the service sends to the internet (webhook receivers,
// image sources): keep-alive connections (undici Agents) in pools of their own per caller's key
// (a webhook endpoint) or else per origin, a time-out covering connecting, headers and body that
// starts once the request has its pool's turn, redirects not followed, and the SSRF guard applied
// to IP literals before connecting and to every address DNS returns, at connection time. Failures
// come back as error kinds.
import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { Agent, request, type Dispatcher } from 'undici';
import type { AddressGuard } from './address-guard.js';

/** Why a request got no usable response, as attempt logs and image states show it. */
export type OutboundErrorKind = 'blocked_address' | 'timeout' | 'connection_refused' | 'connection_error';

/** What one exchange gave: what `read` made of the response, or the error kind; and how long it took. */
export type Exchange<T> = { ok: true; value: T; latencyMs: number } | { ok: false; error: OutboundErrorKind; latencyMs: number };

export interface OutboundRequest {
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /**
   * The pool whose connections the request uses: requests with one key share at most
   * `connections` connections and no other request uses them (a webhook endpoint's key: a slow
   * receiver holds only its own endpoint's connections). Without a key: the origin's pool.
   */
  pool?: string;
}

export interface OutboundClientOptions {
  /**
   * Connecting, waiting for the headers and reading the body each end after this; so does the
   * whole exchange, counted from when the request has its pool's turn (waiting for a turn is not).
   */
  timeoutMs: number;
  /** Keep-alive connections per pool, and requests it sends at once; more wait for a turn. */
  connections: number;
  /** The DNS resolver whose answers the guard checks (default: the system's, dns.lookup); tests give names their addresses. */
  lookup?: typeof dns.lookup;
  /** A pool without requests for this long closes its connections and is forgotten. */
  idleMs?: number;
}

/** What `post` keeps of a response. */
export interface PostResponse {
  statusCode: number;
  /** The first bytes of the body, as received. */
  snippet: Buffer;
  /** The first Retry-After header, if any. */
  retryAfter: string | null;
}

/** A URL as `post` sends to it. */
interface Target {
  origin: string;
  /** Path and query. */
  path: string;
  /** An IP literal the guard refuses. */
  blocked: boolean;
}

/** URLs kept parsed at most: more are parsed again as they come. */
const TARGETS_KEPT = 1024;

class BlockedAddressError extends Error {
  readonly code = 'BLOCKED_ADDRESS';
}

/**
 * A keep-alive undici Agent whose connections pass the SSRF guard: every address DNS returns is
 * checked at connection time, and names the guard refuses never reach DNS.
 */
function createGuardedAgent(guard: AddressGuard, options: OutboundClientOptions, keepAliveMs: number): Agent {
  const guardedLookup: LookupFunction = (hostname, lookupOptions, callback) => {
    if (guard.isReservedName(hostname)) return callback(new BlockedAddressError(`${hostname} is a reserved name`), '', 0);
    (options.lookup ?? dns.lookup)(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses;
      const refused = list.find((a) => guard.isBlockedConnection(hostname, a.address));
      if (refused) return callback(new BlockedAddressError(`${hostname} resolves to ${refused.address}`), '', 0);
      if ((lookupOptions as { all?: boolean }).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      return callback(null, list[0]!.address, list[0]!.family);
    });
  };
  return new Agent({
    keepAliveTimeout: keepAliveMs,
    connections: options.connections,
    connect: { lookup: guardedLookup, timeout: options.timeoutMs },
  });
}

/** What an exchange's time-out (or abortInFlight) aborts it with, as AbortSignal.timeout would. */
const timeoutError = () => new DOMException('The operation was aborted due to timeout', 'TimeoutError');

/** The error kind of a failure without a usable response. */
function errorKind(error: unknown): OutboundErrorKind {
  const e = error as { code?: string; name?: string; cause?: { code?: string } };
  const code = e.code ?? e.cause?.code;
  if (code === 'BLOCKED_ADDRESS' || error instanceof BlockedAddressError) return 'blocked_address';
  if (
    e.name === 'TimeoutError' ||
    e.name === 'AbortError' ||
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT' ||
    code === 'UND_ERR_CONNECT_TIMEOUT'
  )
    return 'timeout';
  if (code === 'ECONNREFUSED') return 'connection_refused';
  return 'connection_error';
}

/**
 * One pool's connections, and its turns: at most `size` requests at once, the others wait in
 * arrival order. With as many connections as turns, a request that has its turn never queues
 * inside undici, so its time-out measures the receiver alone.
 */
class ConnectionPool {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private idleTimer: NodeJS.Timeout | null = null;

  constructor(
    readonly agent: Agent,
    private readonly size: number,
    private readonly onIdle: () => void,
    private readonly idleMs: number,
  ) {}

  /** Resolves when the request may use the pool's connections. */
  turn(): Promise<void> {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    if (this.active < this.size) {
      this.active++;
      return Promise.resolve();
    }
    // The slot is handed over by release(): `active` stays counted for the waiter.
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) return next();
    this.active--;
    if (this.active === 0) {
      this.idleTimer = setTimeout(this.onIdle, this.idleMs);
      this.idleTimer.unref();
    }
  }

  close(): Promise<void> {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    return this.agent.close();
  }
}

export class GuardedHttpClient {
  private readonly pools = new Map<string, ConnectionPool>();
  private readonly idleMs: number;
  private closed = false;
  /** The exchanges in flight, which abortInFlight ends at once: a shutdown that must not wait for their time-outs. */
  private readonly inFlight = new Set<AbortController>();
  /** The same for `post`'s exchanges: each one's abort. */
  private readonly inFlightAborts = new Set<(reason: Error) => void>();
  /** Parsed URLs (target()), at most TARGETS_KEPT. */
  private readonly targets = new Map<string, Target>();
  private abortedInFlight = false;

  constructor(
    private readonly guard: AddressGuard,
    private readonly options: OutboundClientOptions,
  ) {
    this.idleMs = options.idleMs ?? 30_000;
  }

  /** The pool of a key (a webhook endpoint's), or of the URL's origin; created on first use. */
  private pool(key: string): ConnectionPool {
    let pool = this.pools.get(key);
    if (!pool) {
      const created: ConnectionPool = new ConnectionPool(
        createGuardedAgent(this.guard, this.options, this.idleMs),
        this.options.connections,
        () => {
          // Idle since the timer was set: nothing holds or waits for its connections.
          if (this.pools.get(key) === created) this.pools.delete(key);
          void created.close();
        },
        this.idleMs,
      );
      pool = created;
      this.pools.set(key, pool);
    }
    return pool;
  }

  /** Pools currently open (each with its own keep-alive connections). */
  get openPools(): number {
    return this.pools.size;
  }

  /**
   * Sends one request and hands the response to `read` (which reads or discards the body); a
   * failure while connecting, waiting or reading becomes its error kind. A blocked IP literal is
   * refused before anything is sent, in 0 ms. A URL that does not parse throws. The latency and
   * the time-out count from the request's turn in its pool, not from the wait for it.
   */
  async exchange<T>(url: string, init: OutboundRequest, read: (response: Dispatcher.ResponseData) => Promise<T>): Promise<Exchange<T>> {
    const target = new URL(url);
    if (this.guard.isBlockedLiteral(target)) return { ok: false, error: 'blocked_address', latencyMs: 0 };
    // As a closed undici Agent would answer: nothing is sent.
    if (this.closed) return { ok: false, error: 'connection_error', latencyMs: 0 };
    const key = init.pool;
    const pool = this.pool(key ?? `origin:${target.origin}`);
    await pool.turn();
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    // One controller and one timer per exchange, ended by the time-out or by abortInFlight (an
    // AbortSignal.any of AbortSignal.timeout and a shared signal cost several times as much per request).
    const controller = new AbortController();
    if (this.abortedInFlight) controller.abort(timeoutError());
    const timer = setTimeout(() => controller.abort(timeoutError()), this.options.timeoutMs).unref();
    this.inFlight.add(controller);
    try {
      const response = await request(target, {
        method: init.method,
        headers: init.headers,
        body: init.body,
        dispatcher: pool.agent,
        signal: controller.signal,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
      });
      const value = await read(response);
      return { ok: true, value, latencyMs: elapsed() };
    } catch (error) {
      return { ok: false, error: errorKind(error), latencyMs: elapsed() };
    } finally {
      clearTimeout(timer);
      this.inFlight.delete(controller);
      pool.release();
    }
  }

  /**
   * The URL parsed, its origin and path, and whether it is a blocked IP literal: once per URL (a
   * webhook endpoint sends every delivery to the same one), not once per request.
   */
  private target(url: string): Target {
    let target = this.targets.get(url);
    if (!target) {
      const parsed = new URL(url);
      target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}`, blocked: this.guard.isBlockedLiteral(parsed) };
      if (this.targets.size >= TARGETS_KEPT) this.targets.clear();
      this.targets.set(url, target);
    }
    return target;
  }

  /**
   * A POST whose response matters only as its status, its Retry-After and the first `snippetBytes`
   * of its body (a webhook delivery): the same pools, turns, time-out, guard and error kinds as
   * `exchange`, through undici's handler interface rather than `request`, so that an exchange
   * allocates no AbortController, response stream nor async iterator. The body past
   * `snippetBytes` is not read: the connection is closed instead. A URL that does not parse throws.
   */
  async post(url: string, init: Omit<OutboundRequest, 'method'>, snippetBytes: number): Promise<Exchange<PostResponse>> {
    const target = this.target(url);
    if (target.blocked) return { ok: false, error: 'blocked_address', latencyMs: 0 };
    if (this.closed) return { ok: false, error: 'connection_error', latencyMs: 0 };
    const pool = this.pool(init.pool ?? `origin:${target.origin}`);
    await pool.turn();
    const started = performance.now();
    return new Promise<Exchange<PostResponse>>((resolve) => {
      let settled = false;
      /** undici's abort of the request, once it is on a connection. */
      let abortRequest: ((reason: Error) => void) | null = null;
      let abortReason: Error | null = null;
      let statusCode = 0;
      let retryAfter: string | null = null;
      const chunks: Buffer[] = [];
      let size = 0;
      const settle = (outcome: { ok: true; value: PostResponse } | { ok: false; error: OutboundErrorKind }) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.inFlightAborts.delete(abort);
        pool.release();
        resolve({ ...outcome, latencyMs: Math.round(performance.now() - started) });
      };
      const abort = (reason: Error) => {
        if (abortRequest) abortRequest(reason);
        else abortReason ??= reason;
      };
      const timer = setTimeout(() => abort(timeoutError()), this.options.timeoutMs).unref();
      this.inFlightAborts.add(abort);
      if (this.abortedInFlight) abort(timeoutError());
      const snippet = () => Buffer.concat(chunks, Math.min(size, snippetBytes));
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart: (controller) => {
          // Started again on another connection (a retried request): the newest one aborts.
          if (abortReason) return controller.abort(abortReason);
          abortRequest = (reason) => controller.abort(reason);
        },
        onResponseStart: (_controller, status, headers) => {
          // 1xx: informational, the response is still to come.
          if (status < 200) return;
          statusCode = status;
          const header = headers['retry-after'];
          retryAfter = Array.isArray(header) ? (header[0] ?? null) : (header ?? null);
        },
        onResponseData: (controller, chunk) => {
          if (size < snippetBytes) chunks.push(chunk.subarray(0, snippetBytes - size));
          size += chunk.length;
          if (size >= snippetBytes) {
            // What is kept is read: the rest is not waited for (the connection is closed).
            settle({ ok: true, value: { statusCode, snippet: snippet(), retryAfter } });
            controller.abort(new Error('the snippet is read'));
          }
        },
        onResponseEnd: () => settle({ ok: true, value: { statusCode, snippet: snippet(), retryAfter } }),
        onResponseError: (_controller, error) => settle({ ok: false, error: errorKind(error) }),
      };
      try {
        pool.agent.dispatch(
          {
            origin: target.origin,
            path: target.path,
            method: 'POST',
            headers: init.headers,
            body: init.body,
            headersTimeout: this.options.timeoutMs,
            bodyTimeout: this.options.timeoutMs,
          },
          handler,
        );
      } catch (error) {
        settle({ ok: false, error: errorKind(error) });
      }
    });
  }

  /** Ends the exchanges in flight now (their error: `timeout`), and every later one at once. */
  abortInFlight(): void {
    this.abortedInFlight = true;
    for (const controller of this.inFlight) controller.abort(timeoutError());
    this.inFlight.clear();
    for (const abort of [...this.inFlightAborts]) abort(timeoutError());
  }

  /** Closes every pool's connections, after the requests they are sending. */
  async close(): Promise<void> {
    this.closed = true;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((pool) => pool.close()));
  }
}
