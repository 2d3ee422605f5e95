// Sends one signed delivery: keep-alive connections (undici Agent), a per-request time-out,
// redirects not followed, the response body read up to a bound for the attempt log, and the SSRF
// guard applied to every address DNS returns, at connection time.
import dns from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, request } from 'undici';
import type { AddressGuard } from './address-guard.js';

export interface SendResult {
  /** HTTP status, or null when no response arrived. */
  statusCode: number | null;
  /** Why the attempt failed without (or despite) a response: timeout, connection_refused, ... */
  error: string | null;
  latencyMs: number;
  responseSnippet: string | null;
  retryAfter: string | null;
}

export interface DeliverySender {
  send(url: string, headers: Record<string, string>, body: string): Promise<SendResult>;
  close(): Promise<void>;
}

class BlockedAddressError extends Error {
  readonly code = 'BLOCKED_ADDRESS';
}

/**
 * A keep-alive undici Agent whose connections pass the SSRF guard: every address DNS returns is
 * checked at connection time, and names the guard refuses never reach DNS.
 */
export function createGuardedAgent(guard: AddressGuard, options: { timeoutMs: number; connections: number }): Agent {
  const guardedLookup: LookupFunction = (hostname, lookupOptions, callback) => {
    if (guard.isReservedName(hostname)) return callback(new BlockedAddressError(`${hostname} is a reserved name`), '', 0);
    dns.lookup(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
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

/** What `error` an attempt log shows for a failure without a usable response. */
export function errorKind(error: unknown): string {
  const e = error as { code?: string; name?: string; cause?: { code?: string } };
  const code = e.code ?? e.cause?.code;
  if (code === 'BLOCKED_ADDRESS' || error instanceof BlockedAddressError) return 'blocked_address';
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return 'timeout';
  if (code === 'ECONNREFUSED') return 'connection_refused';
  return 'connection_error';
}

export class HttpDeliverySender implements DeliverySender {
  private readonly agent: Agent;

  constructor(
    private readonly guard: AddressGuard,
    private readonly options: { timeoutMs: number; snippetBytes?: number; connectionsPerOrigin?: number },
  ) {
    this.agent = createGuardedAgent(guard, { timeoutMs: options.timeoutMs, connections: options.connectionsPerOrigin ?? 8 });
  }

  async send(url: string, headers: Record<string, string>, body: string): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
    // An IP literal never goes through DNS, so it is checked here.
    if (isIP(host) && this.guard.isBlockedConnection(host, host)) {
      return { statusCode: null, error: 'blocked_address', latencyMs: 0, responseSnippet: null, retryAfter: null };
    }
    try {
      const response = await request(url, {
        method: 'POST', headers, body, dispatcher: this.agent,
        signal: AbortSignal.timeout(this.options.timeoutMs),
        headersTimeout: this.options.timeoutMs, bodyTimeout: this.options.timeoutMs,
      });
      const snippet = await readSnippet(response.body, this.options.snippetBytes ?? 4096);
      const retryAfter = response.headers['retry-after'];
      const statusCode = response.statusCode;
      const error = statusCode >= 200 && statusCode < 300 ? null : statusCode >= 300 && statusCode < 400 ? 'redirect' : 'http_status';
      return { statusCode, error, latencyMs: elapsed(), responseSnippet: snippet, retryAfter: Array.isArray(retryAfter) ? retryAfter[0]! : retryAfter ?? null };
    } catch (error) {
      return { statusCode: null, error: errorKind(error), latencyMs: elapsed(), responseSnippet: null, retryAfter: null };
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** Reads at most `limit` bytes of a body as UTF-8 and discards the rest. */
async function readSnippet(body: AsyncIterable<Uint8Array> & { destroy?: () => void }, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    if (size < limit) chunks.push(Buffer.from(chunk).subarray(0, limit - size));
    size += chunk.length;
    if (size >= limit) {
      body.destroy?.();
      break;
    }
  }
  return Buffer.concat(chunks).toString('utf8');
}
