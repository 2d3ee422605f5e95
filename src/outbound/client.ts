// The one guarded HTTP client for everything the service sends to the internet (webhook receivers,
// image sources): keep-alive connections (undici Agent), a time-out covering connecting, headers
// and body, redirects not followed, and the SSRF guard applied to IP literals before connecting
// and to every address DNS returns, at connection time. Failures come back as error kinds.
import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { Agent, request, type Dispatcher } from 'undici';
import type { AddressGuard } from './address-guard.js';

/** Why a request got no usable response, as attempt logs and image states show it. */
export type OutboundErrorKind = 'blocked_address' | 'timeout' | 'connection_refused' | 'connection_error';

/** What one exchange gave: what `read` made of the response, or the error kind; and how long it took. */
export type Exchange<T> =
  | { ok: true; value: T; latencyMs: number }
  | { ok: false; error: OutboundErrorKind; latencyMs: number };

export interface OutboundRequest {
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
}

export interface OutboundClientOptions {
  /** Connecting, waiting for the headers and reading the body each end after this; so does the whole exchange. */
  timeoutMs: number;
  /** Keep-alive connections per origin. */
  connections: number;
  /** The DNS resolver whose answers the guard checks (default: the system's, dns.lookup); tests give names their addresses. */
  lookup?: typeof dns.lookup;
}

class BlockedAddressError extends Error {
  readonly code = 'BLOCKED_ADDRESS';
}

/**
 * A keep-alive undici Agent whose connections pass the SSRF guard: every address DNS returns is
 * checked at connection time, and names the guard refuses never reach DNS.
 */
function createGuardedAgent(guard: AddressGuard, options: OutboundClientOptions): Agent {
  const guardedLookup: LookupFunction = (hostname, lookupOptions, callback) => {
    if (guard.isReservedName(hostname)) return callback(new BlockedAddressError(`${hostname} is a reserved name`), '', 0);
    (options.lookup ?? dns.lookup)(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses as unknown as dns.LookupAddress[];
      const refused = list.find((a) => guard.isBlockedConnection(hostname, a.address));
      if (refused) return callback(new BlockedAddressError(`${hostname} resolves to ${refused.address}`), '', 0);
      if ((lookupOptions as { all?: boolean }).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      return callback(null, list[0]!.address, list[0]!.family);
    });
  };
  return new Agent({
    keepAliveTimeout: 30_000,
    connections: options.connections,
    connect: { lookup: guardedLookup, timeout: options.timeoutMs },
  });
}

/** The error kind of a failure without a usable response. */
function errorKind(error: unknown): OutboundErrorKind {
  const e = error as { code?: string; name?: string; cause?: { code?: string } };
  const code = e.code ?? e.cause?.code;
  if (code === 'BLOCKED_ADDRESS' || error instanceof BlockedAddressError) return 'blocked_address';
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return 'timeout';
  if (code === 'ECONNREFUSED') return 'connection_refused';
  return 'connection_error';
}

export class GuardedHttpClient {
  private readonly agent: Agent;

  constructor(private readonly guard: AddressGuard, private readonly options: OutboundClientOptions) {
    this.agent = createGuardedAgent(guard, options);
  }

  /**
   * Sends one request and hands the response to `read` (which reads or discards the body); a
   * failure while connecting, waiting or reading becomes its error kind. A blocked IP literal is
   * refused before anything is sent, in 0 ms. A URL that does not parse throws.
   */
  async exchange<T>(url: string, init: OutboundRequest, read: (response: Dispatcher.ResponseData) => Promise<T>): Promise<Exchange<T>> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    if (this.guard.isBlockedLiteral(new URL(url))) return { ok: false, error: 'blocked_address', latencyMs: 0 };
    try {
      const response = await request(url, {
        ...init, dispatcher: this.agent,
        signal: AbortSignal.timeout(this.options.timeoutMs),
        headersTimeout: this.options.timeoutMs, bodyTimeout: this.options.timeoutMs,
      });
      const value = await read(response);
      return { ok: true, value, latencyMs: elapsed() };
    } catch (error) {
      return { ok: false, error: errorKind(error), latencyMs: elapsed() };
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}
