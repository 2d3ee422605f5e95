// Real webhook receivers for tests: node:http servers on 127.0.0.1 whose answer can be switched
// (2xx, 5xx, 3xx, 410, 429 with Retry-After, a hang past the delivery time-out, a refused
// connection, or any bytes as the body), logging every request with its method, headers and raw body. Every request is
// checked the way an integrator's receiver must check it, so no test can forget to:
// - spec 4.5: POST, `Content-Type: application/json`, `X-Service-Timestamp` in Unix seconds;
// - spec 5: `X-Service-Signature` = `sha256=` + lowercase hex HMAC-SHA256 over
//   `{timestamp}.{raw body}` keyed with the endpoint's secret, compared in constant time;
// - the Standard Webhooks `webhook-signature`, when sent;
// - the body against the schema of its event in the public document's `webhooks:` section, and
//   every header the service sets (X-Service-*, webhook-*) against the headers that event declares.
// A request that fails a check is answered 400 (as the reference receivers do) and recorded; reading
// the log of, or closing, a receiver that saw one throws.
import { createHmac, timingSafeEqual } from 'node:crypto';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { components } from '../../src/generated/public-api.js';
import { publicContract } from './contract.js';

export type WebhookPayload = components['schemas']['WebhookPayload'];

/** How the receiver answers one request. */
export type Answer =
  | {
      status: number;
      headers?: Record<string, string>;
      body?: string | Buffer;
      delayMs?: number;
      /** Held until this settles (then delayMs): a test decides when the deliveries in flight end. */
      after?: Promise<unknown>;
    }
  /** Read the request, never answer (the delivery time-out must end it). */
  | 'hang';

export type Behaviour = Answer | ((request: ReceivedRequest) => Answer);

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The header lines as they arrived, in order and in their own case: name, value, name, value… */
  rawHeaders: string[];
  /** The exact bytes of the body, as received. */
  rawBody: Buffer;
  timestamp: string;
  signature: string;
  /** The parsed body; checked against the `webhooks:` schema of its event. */
  payload: WebhookPayload;
  /** The secret whose signature matched. */
  verifiedWith: string;
  /** Real time of arrival. */
  receivedAt: number;
  /** The client's port: the same one for requests over one keep-alive connection. */
  remotePort: number;
}

export interface ReceiverOptions {
  /** The receiver's clock for the timestamp tolerance (a test's fake clock). */
  now?: () => Date;
  /** spec 5 / docs/decisions.md#signing-secrets: receivers reject timestamps more than 5 minutes away. */
  toleranceSeconds?: number;
  behaviour?: Behaviour;
}

/** `sha256=` + lowercase hex HMAC-SHA256 over `${timestamp}.${rawBody}` (spec 5, rule 2). */
export function computeSignature(secret: string, timestamp: string, rawBody: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex')}`;
}

/** spec 5, rule 3: constant-time comparison with the computed value. */
export function signatureMatches(secret: string, timestamp: string, rawBody: Buffer | string, signature: string): boolean {
  const expected = Buffer.from(computeSignature(secret, timestamp, rawBody));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

const webhooks = (publicContract.doc.webhooks ?? {}) as Record<string, any>;
const parameters = (publicContract.doc.components?.parameters ?? {}) as Record<string, any>;

/** Why a request is not a valid, authentic delivery (empty when it is). */
function check(
  method: string,
  headers: IncomingHttpHeaders,
  rawBody: Buffer,
  secrets: readonly string[],
  now: Date,
  toleranceSeconds: number,
): { problems: string[]; payload?: WebhookPayload; verifiedWith?: string } {
  const problems: string[] = [];
  if (method !== 'POST') problems.push(`method ${method}, not POST`);
  if (headers['content-type'] !== 'application/json')
    problems.push(`Content-Type "${String(headers['content-type'])}", not application/json`);
  const timestamp = headers['x-service-timestamp'];
  const signature = headers['x-service-signature'];
  if (typeof timestamp !== 'string' || !/^[0-9]+$/.test(timestamp)) {
    problems.push(`X-Service-Timestamp "${String(timestamp)}" is not Unix seconds`);
  } else if (Math.abs(Number(timestamp) - now.getTime() / 1000) > toleranceSeconds) {
    problems.push(`X-Service-Timestamp ${timestamp} is more than ${toleranceSeconds} s away from ${now.toISOString()}`);
  }
  if (typeof signature !== 'string' || !/^sha256=[0-9a-f]{64}$/.test(signature)) {
    problems.push(`X-Service-Signature "${String(signature)}" is not sha256= + 64 lowercase hex digits`);
  }
  let verifiedWith: string | undefined;
  if (typeof timestamp === 'string' && typeof signature === 'string') {
    verifiedWith = secrets.find((secret) => signatureMatches(secret, timestamp, rawBody, signature));
    if (!verifiedWith)
      problems.push(secrets.length ? 'signature does not verify with the endpoint secret' : 'the receiver has no secret set');
  }
  // The Standard Webhooks signature, when sent: one of its `v1,` signatures, keyed with
  // what a secret's part after whsec_ decodes to, over `{webhook-id}.{webhook-timestamp}.{raw body}`.
  const standard = headers['webhook-signature'];
  if (typeof standard === 'string') {
    const id = headers['webhook-id'];
    const at = headers['webhook-timestamp'];
    if (at !== timestamp) problems.push(`webhook-timestamp "${String(at)}" is not X-Service-Timestamp "${String(timestamp)}"`);
    const signed = secrets.some((secret) => {
      const expected = createHmac('sha256', Buffer.from(secret.replace(/^whsec_/, ''), 'base64'))
        .update(`${String(id)}.${String(at)}.`)
        .update(rawBody)
        .digest('base64');
      return standard.split(' ').some((s) => s === `v1,${expected}`);
    });
    if (!signed) problems.push('webhook-signature does not verify with the endpoint secret');
  }
  let payload: WebhookPayload | undefined;
  try {
    payload = JSON.parse(rawBody.toString('utf8')) as WebhookPayload;
  } catch {
    problems.push(`body is not JSON: ${rawBody.toString('utf8').slice(0, 200)}`);
  }
  if (payload) {
    const operation = webhooks[String(payload.event)]?.post;
    if (!operation) {
      problems.push(`event "${payload.event}" is not in the webhooks: section`);
    } else {
      try {
        const declaredNames = (operation.parameters as { $ref: string }[]).map((p) =>
          (parameters[p.$ref.split('/').pop()!]!.name as string).toLowerCase(),
        );
        // The service's own headers are all declared: one the document does not name is a contract break.
        for (const name of Object.keys(headers))
          if (/^(x-service-|webhook-)/.test(name) && !declaredNames.includes(name))
            problems.push(`the ${name} header is not declared in the webhooks: section`);
        for (const parameter of operation.parameters as { $ref: string }[]) {
          const declared = parameters[parameter.$ref.split('/').pop()!]!;
          const name = (declared.name as string).toLowerCase();
          // A header only some deliveries carry (a resend's, the Standard Webhooks ones) is checked when present.
          if (headers[name] === undefined) {
            if (declared.required) problems.push(`the ${declared.name} header is missing`);
            continue;
          }
          publicContract.validateSchema(`${parameter.$ref.slice(1)}/schema`, headers[name]);
        }
        publicContract.validateSchema((operation.requestBody.content['application/json'].schema.$ref as string).slice(1), payload);
      } catch (error) {
        problems.push((error as Error).message);
      }
    }
  }
  return { problems, payload, verifiedWith };
}

export class Receiver {
  /** The endpoint's signing secret(s) the receiver verifies with; tests set it on registration. */
  secrets: string[] = [];
  private readonly log: ReceivedRequest[] = [];
  private readonly violations: string[] = [];
  private behaviour: Behaviour;
  private inFlight = 0;
  /** The most requests that were open at once. */
  maxInFlight = 0;

  /** Requests open right now (received, not yet answered, their client still there). */
  get inFlightNow(): number {
    return this.inFlight;
  }
  private server: http.Server;
  private listening = false;

  private constructor(
    readonly port: number,
    server: http.Server,
    private readonly options: ReceiverOptions,
  ) {
    this.server = server;
    this.behaviour = options.behaviour ?? { status: 200 };
  }

  /** Starts a receiver on 127.0.0.1, on a port chosen by the system. */
  static async start(options: ReceiverOptions = {}): Promise<Receiver> {
    // `receiver` exists before a request can be handled: that takes a later turn of the event loop.
    const server = http.createServer((req, res) => receiver.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const receiver = new Receiver((server.address() as AddressInfo).port, server, options);
    receiver.listening = true;
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks/catalog`;
  }

  set secret(secret: string) {
    this.secrets = [secret];
  }

  /** Switches how the next requests are answered. */
  answer(behaviour: Behaviour): this {
    this.behaviour = behaviour;
    return this;
  }

  /** Every request received, oldest first; throws if any of them was not a valid, authentic delivery. */
  get requests(): ReceivedRequest[] {
    this.assertNoViolations();
    return [...this.log];
  }

  /** The payloads received, oldest first (checked like `requests`). */
  get payloads(): WebhookPayload[] {
    return this.requests.map((r) => r.payload);
  }

  get count(): number {
    this.assertNoViolations();
    return this.log.length;
  }

  assertNoViolations(): void {
    if (this.violations.length) throw new Error(`receiver ${this.url} got invalid deliveries:\n${this.violations.join('\n')}`);
  }

  /** Polls (real time) until at least n requests arrived. */
  async waitFor(n: number, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.count < n) {
      if (Date.now() > deadline) throw new Error(`receiver got ${this.count} requests, waited for ${n}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /** Stops listening and drops open connections but keeps the port: connections are refused. */
  async refuse(): Promise<void> {
    if (!this.listening) return;
    this.listening = false;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  /** Listens again on the same port after refuse(). */
  async reopen(): Promise<void> {
    if (this.listening) return;
    const server = http.createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.listening = true;
  }

  async close(): Promise<void> {
    await this.refuse();
    this.assertNoViolations();
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    // Ended when answered, or as soon as the client is gone: its end of the connection read (a FIN:
    // 'end'; a reset: 'close'), not when the socket finally closes turns of the event loop later, by
    // when the client (a sender whose time-out aborted this one) may have sent its next requests.
    const socket = req.socket;
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      this.inFlight--;
      socket.off('end', end);
      socket.off('close', end);
    };
    res.once('close', end);
    socket.once('end', end);
    socket.once('close', end);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      const now = this.options.now?.() ?? new Date();
      const { problems, payload, verifiedWith } = check(
        req.method ?? '',
        req.headers,
        rawBody,
        this.secrets,
        now,
        this.options.toleranceSeconds ?? 300,
      );
      const request: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        rawBody,
        timestamp: String(req.headers['x-service-timestamp']),
        signature: String(req.headers['x-service-signature']),
        payload: payload!,
        verifiedWith: verifiedWith ?? '',
        receivedAt: Date.now(),
        remotePort: req.socket.remotePort ?? 0,
      };
      this.log.push(request);
      if (problems.length) {
        this.violations.push(`${req.method} ${req.url} ${rawBody.toString('utf8').slice(0, 300)}\n  ${problems.join('\n  ')}`);
        res.writeHead(400, { 'Content-Type': 'text/plain' }).end('invalid signature or payload');
        return;
      }
      const answer = typeof this.behaviour === 'function' ? this.behaviour(request) : this.behaviour;
      if (answer === 'hang') return;
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status, answer.headers ?? {}).end(answer.body ?? '');
      };
      const delayed = () => (answer.delayMs ? setTimeout(send, answer.delayMs) : send());
      if (answer.after) void answer.after.then(delayed, delayed);
      else delayed();
    });
  }
}

/** Common answers. */
export const answers = {
  ok: { status: 200 },
  noContent: { status: 204 },
  serverError: { status: 500, body: 'Internal Server Error' },
  unavailable: { status: 503, body: 'Service Unavailable' },
  gone: { status: 410, body: 'Gone' },
  redirect: (location: string, status = 302) => ({ status, headers: { Location: location } }),
  tooManyRequests: (retryAfter: string, status = 429) => ({ status, headers: { 'Retry-After': retryAfter } }),
  hang: 'hang' as const,
} satisfies Record<string, Answer | ((...args: never[]) => Answer)>;
