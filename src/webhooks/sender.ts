// Sends one signed delivery through the guarded outbound client (src/outbound: keep-alive
// connections, the time-out, redirects not followed, the SSRF guard), with the response body read
// up to a bound for the attempt log. Each endpoint has connections of its own: a receiver that
// hangs holds only its endpoint's, never those of another endpoint on the same host.
import type { AddressGuard } from '../outbound/address-guard.js';
import { GuardedHttpClient } from '../outbound/client.js';
import { validTextOfBytes } from '../shared/valid-text.js';

export interface SendResult {
  /** HTTP status, or null when no response arrived. */
  statusCode: number | null;
  /** Why the attempt failed without (or despite) a response: timeout, connection_refused, ... */
  error: string | null;
  latencyMs: number;
  /** The start of the body as valid text (a gzip or binary body included: docs/decisions.md#text). */
  responseSnippet: string | null;
  retryAfter: string | null;
}

export interface DeliverySender {
  /** `endpointId`: the endpoint whose own connections carry the request (without one: the URL origin's). */
  send(url: string, headers: Record<string, string>, body: string, endpointId?: number): Promise<SendResult>;
  close(): Promise<void>;
}

export class HttpDeliverySender implements DeliverySender {
  private readonly client: GuardedHttpClient;

  constructor(
    guard: AddressGuard,
    /**
     * `connectionsPerEndpoint`: keep-alive connections of one endpoint, and requests sent to it at
     * once (the dispatcher's per-endpoint concurrency: none ever waits for a connection).
     */
    private readonly options: { timeoutMs: number; snippetBytes?: number; connectionsPerEndpoint?: number },
  ) {
    this.client = new GuardedHttpClient(guard, { timeoutMs: options.timeoutMs, connections: options.connectionsPerEndpoint ?? 8 });
  }

  async send(url: string, headers: Record<string, string>, body: string, endpointId?: number): Promise<SendResult> {
    const pool = endpointId === undefined ? undefined : `webhook-endpoint:${endpointId}`;
    const exchange = await this.client.post(url, { headers, body, pool }, this.options.snippetBytes ?? 4096);
    if (!exchange.ok)
      return { statusCode: null, error: exchange.error, latencyMs: exchange.latencyMs, responseSnippet: null, retryAfter: null };
    const { statusCode, snippet, retryAfter } = exchange.value;
    const error = statusCode >= 200 && statusCode < 300 ? null : statusCode >= 300 && statusCode < 400 ? 'redirect' : 'http_status';
    return { statusCode, error, latencyMs: exchange.latencyMs, responseSnippet: validTextOfBytes(snippet), retryAfter };
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
