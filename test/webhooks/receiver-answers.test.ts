// Whatever a receiver answers, its attempt is recorded once (docs/decisions.md#text,
// #retries): a body of gzip bytes, NUL bytes or invalid UTF-8 is kept as valid text, a
// Retry-After is honoured up to the last backoff step and ignored when it does not parse, and an
// attempt whose bookkeeping fails anyway counts as a failed attempt, retried on the backoff. None of
// them may leave the delivery at `attempts: 0` to be sent again each time its lease runs out.
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import type { CatalogStorage, StorageTx } from '../../src/storage/port.js';
import { RECORDING_FAILED } from '../../src/webhooks/attempt-recorder.js';
import { answers, type Answer } from '../support/receiver.js';
import { HOUR, SECOND, WEBHOOK_DEFAULTS, plus, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld;
afterEach(async () => {
  await world?.close();
});

/** A claimed delivery whose attempt is never recorded is sent again once this lease has run out. */
const LEASE_MS = WEBHOOK_DEFAULTS.timeoutMs + WEBHOOK_DEFAULTS.leaseMarginMs;
/** The first and the last backoff steps (jitter fixed at x1.0 by the harness's random 0.5). */
const FIRST_RETRY_MS = 30 * SECOND;
const LAST_STEP_MS = 6 * HOUR;

const now = () => world.clock.now().toISOString();

/** One store, one receiver for `price` events answering `answer`, and one price change delivered. */
async function oneAttempt(answer: Answer, options: Parameters<typeof startWebhookWorld>[0] = {}) {
  world = await startWebhookWorld({ stores: ['de'], ...options });
  const receiver = await world.receiver({ behaviour: answer });
  const endpoint = await world.register(receiver, { events: ['price'] });
  await world.putProduct('A');
  await world.after(2 * SECOND);
  expect(receiver.count).toBe(1);
  const [delivery] = await world.deliveries(endpoint.id);
  const detail = await world.delivery(endpoint.id, delivery!.id);
  return { receiver, endpoint, delivery: delivery!, attempts: detail.attempts };
}

describe("a receiver's body is kept as valid text", () => {
  it('records a 200 whose body is gzip bytes as a success, its snippet as text, and never sends it again', async () => {
    const gzipped = gzipSync(JSON.stringify({ received: true }));
    // The gzip header holds NUL bytes: PostgreSQL refused the snippet, and the attempt with it.
    expect(gzipped.includes(0)).toBe(true);
    const { receiver, endpoint, delivery, attempts } = await oneAttempt({
      status: 200,
      headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
      body: gzipped,
    });
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 1, next_attempt_at: null });
    expect(attempts).toHaveLength(1);
    const snippet = attempts[0]!.response_snippet!;
    expect(attempts[0]).toMatchObject({ status_code: 200, error: null });
    // The bytes as received (not decompressed), NUL and invalid UTF-8 as U+FFFD.
    expect(snippet.startsWith('\u001f\uFFFD\b\uFFFD\uFFFD')).toBe(true);
    expect(snippet).not.toContain('\u0000');
    expect(await world.endpoint(endpoint.id)).toMatchObject({ status: 'active', consecutive_failures: 0, last_success_at: now() });
    for (let i = 0; i < 3; i++) await world.after(LEASE_MS);
    expect(receiver.count).toBe(1);
  });

  it('records a 500 whose body holds NUL bytes and invalid UTF-8 as one failed attempt, retried on the backoff rather than the lease', async () => {
    const body = Buffer.concat([Buffer.from('err'), Buffer.from([0x00, 0xff, 0xfe, 0xed, 0xa0, 0x80, 0xc3]), Buffer.from('end')]);
    const { receiver, endpoint, delivery, attempts } = await oneAttempt({ status: 500, body });
    const failedAt = now();
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: plus(failedAt, FIRST_RETRY_MS) });
    expect(attempts).toEqual([
      expect.objectContaining({
        status_code: 500,
        error: 'http_status',
        response_snippet: `err${'\uFFFD'.repeat(7)}end`,
      }),
    ]);
    expect(await world.endpoint(endpoint.id)).toMatchObject({ consecutive_failures: 1, last_failure_at: failedAt });

    receiver.answer(answers.ok);
    await world.after(FIRST_RETRY_MS - 1);
    expect(receiver.count).toBe(1);
    await world.after(1);
    expect(receiver.count).toBe(2);
    expect((await world.deliveries(endpoint.id))[0]).toMatchObject({ status: 'succeeded', attempts: 2 });
    await world.after(LEASE_MS);
    expect(receiver.count).toBe(2);
  });
});

describe('Retry-After is bounded (honoured up to the last backoff step, ignored when it does not parse)', () => {
  it.each([
    { retryAfter: '99999999999999999999', why: 'more seconds than a date can hold' },
    { retryAfter: '999999999', why: 'about 31 years' },
    { retryAfter: 'Fri, 01 Jan 2100 00:00:00 GMT', why: 'an HTTP date decades away' },
  ])('waits the last backoff step, 6 h, for Retry-After: $retryAfter ($why)', async ({ retryAfter }) => {
    const { receiver, endpoint, delivery, attempts } = await oneAttempt(answers.tooManyRequests(retryAfter, 503));
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: plus(now(), LAST_STEP_MS) });
    expect(attempts).toEqual([expect.objectContaining({ status_code: 503, error: 'http_status' })]);
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(1);
    receiver.answer(answers.ok);
    await world.after(LEASE_MS);
    expect(receiver.count).toBe(1);
    await world.after(LAST_STEP_MS - LEASE_MS);
    expect(receiver.count).toBe(2);
  });

  it.each([
    { retryAfter: 'soon' },
    { retryAfter: '-5' },
    { retryAfter: '12.5' },
    // Date.parse reads these, HTTP does not: not an HTTP date.
    { retryAfter: '2058-01-01' },
    { retryAfter: 'Fri, 01 Jan 275760 00:00:00 GMT' },
    { retryAfter: 'Mon, 31 Feb 2031 00:00:00 GMT' },
  ])('keeps the backoff for Retry-After: $retryAfter, which does not parse', async ({ retryAfter }) => {
    const { endpoint, delivery } = await oneAttempt(answers.tooManyRequests(retryAfter));
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: plus(now(), FIRST_RETRY_MS) });
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(1);
  });
});

/**
 * The service's storage for the dispatcher, except that the operations `refuses` names reject (in
 * and out of transactions), as a storage that cannot hold what it is given would.
 */
function refusing(storage: CatalogStorage, refuses: (operation: string, args: unknown[]) => boolean): CatalogStorage {
  const guard = <T extends object>(target: T, extra: (key: string | symbol, value: unknown) => unknown = () => undefined): T =>
    new Proxy(target, {
      get(object, key) {
        const value: unknown = Reflect.get(object, key, object);
        if (typeof value !== 'function') return value;
        const replaced = extra(key, value);
        if (replaced) return replaced;
        return (...args: unknown[]) =>
          refuses(String(key), args)
            ? Promise.reject(new Error(`simulated storage failure in ${String(key)}`))
            : (value as (...a: unknown[]) => unknown).apply(object, args);
      },
    });
  return guard(
    storage,
    (key, value) =>
      key === 'transaction' &&
      (<T>(fn: (tx: StorageTx) => Promise<T>) => (value as CatalogStorage['transaction']).call(storage, (tx) => fn(guard(tx)))),
  );
}

/** True when the operation stores an attempt whose response snippet holds `marker`. */
const storesSnippet = (marker: string) => (operation: string, args: unknown[]) => {
  const attempts =
    operation === 'recordAttemptOutcomes' || operation === 'recordAttemptOutcomesWithHealth' || operation === 'recordSuccessfulAttempts'
      ? (args[0] as { attempt: { response_snippet: string | null } }[]).map((o) => o.attempt)
      : operation === 'recordAttempt'
        ? [args[1] as { response_snippet: string | null }]
        : [];
  return attempts.some((a) => a.response_snippet?.includes(marker));
};

describe('an attempt whose bookkeeping fails counts as a failed attempt', () => {
  it("records a failed attempt `recording_failed`, counts it in the endpoint's health and retries on the backoff when the storage refuses the attempt", async () => {
    const { receiver, endpoint, delivery, attempts } = await oneAttempt(
      { status: 200, body: 'unstorable answer' },
      { dispatcherStorage: (storage) => refusing(storage, storesSnippet('unstorable')) },
    );
    const failedAt = now();
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: plus(failedAt, FIRST_RETRY_MS) });
    expect(attempts).toEqual([
      {
        at: failedAt,
        status_code: 200,
        error: RECORDING_FAILED,
        latency_ms: expect.any(Number),
        response_snippet: null,
        // The request was sent: it is kept, whatever became of the answer.
        request_url: receiver.url,
        request_headers: expect.objectContaining({ 'X-Service-Signature': expect.stringMatching(/^sha256=[0-9a-f]{64}$/) }),
      },
    ]);
    expect(await world.endpoint(endpoint.id)).toMatchObject({ consecutive_failures: 1, last_failure_at: failedAt });

    // Not re-sent when the lease would have run out; sent again on the backoff, and recorded.
    receiver.answer({ status: 200, body: 'ok' });
    await world.after(FIRST_RETRY_MS - 1);
    expect(receiver.count).toBe(1);
    await world.after(1);
    expect(receiver.count).toBe(2);
    expect((await world.deliveries(endpoint.id))[0]).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect(await world.endpoint(endpoint.id)).toMatchObject({ consecutive_failures: 0, last_success_at: now() });
    await world.after(LEASE_MS);
    expect(receiver.count).toBe(2);
  });

  it("still records the failed attempt and its retry when the endpoint's health cannot be written either", async () => {
    const refusesSnippet = storesSnippet('unstorable');
    const { receiver, endpoint, delivery, attempts } = await oneAttempt(
      { status: 200, body: 'unstorable answer' },
      {
        dispatcherStorage: (storage) =>
          refusing(
            storage,
            (operation, args) =>
              operation === 'updateWebhookEndpointsHealth' ||
              // PostgreSQL writes the health in the outcomes' statement: refused when it carries any.
              (operation === 'recordAttemptOutcomesWithHealth' && (args[1] as unknown[]).length > 0) ||
              refusesSnippet(operation, args),
          ),
      },
    );
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: plus(now(), FIRST_RETRY_MS) });
    expect(attempts).toEqual([expect.objectContaining({ status_code: 200, error: RECORDING_FAILED, response_snippet: null })]);
    // The health could not be written: untouched.
    expect(await world.endpoint(endpoint.id)).toMatchObject({ consecutive_failures: 0, last_failure_at: null });
    await world.after(FIRST_RETRY_MS - 1);
    expect(receiver.count).toBe(1);
  });

  it("gives the delivery up after the last step when every attempt's bookkeeping fails", async () => {
    const { receiver, endpoint } = await oneAttempt(
      { status: 200, body: 'unstorable answer' },
      { dispatcherStorage: (storage) => refusing(storage, storesSnippet('unstorable')) },
    );
    for (const stepMs of [30 * SECOND, 2 * 60 * SECOND, 10 * 60 * SECOND, HOUR, 6 * HOUR]) await world.after(stepMs);
    expect(receiver.count).toBe(6);
    const [delivery] = await world.deliveries(endpoint.id);
    expect(delivery).toMatchObject({ status: 'given_up', attempts: 6, next_attempt_at: null });
    await world.after(LEASE_MS);
    expect(receiver.count).toBe(6);
  });
});
