// Password hashing holds a bounded share of Node's thread pool (admin/password-hashing.ts), over
// real HTTP on either engine: sign-ins of distinct accounts from distinct addresses (so the throttle
// refuses none) run at most CPS_PANEL_PASSWORD_HASHES_AT_ONCE hashes at once, at most
// CPS_PANEL_PASSWORD_HASH_QUEUE wait, the rest are refused at once with 503 and Retry-After (and
// counted in /metrics), and a gzip export, whose coding runs on the same pool, is answered while the
// hashes still queue. The clients' addresses come from X-Forwarded-For through 127.0.0.1, a trusted proxy.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Config } from '../../src/config.js';
import { startTestService, type TestService } from '../support/service.js';
import { merchantWithTents } from '../support/tent-catalog.js';

describe('password hashing under a flood of sign-ins', () => {
  let service: TestService;
  let key: string;
  const limits: Config['panel']['passwordHashes'] = { atOnce: 1, queue: 3 };

  beforeAll(async () => {
    service = await startTestService({ config: { trustedProxies: ['127.0.0.1'], panel: { passwordHashes: limits } } });
    const id = await merchantWithTents(service, 'Busy Outdoor', 50, 'Leichtes Trekkingzelt mit zwei Apsiden. '.repeat(50));
    key = await service.keyFor(id);
  }, 60_000);
  afterAll(() => service.close());
  afterEach(() => vi.restoreAllMocks());

  /** The most hashes running at once from now on, as the hasher reports them to the metrics. */
  function watchHashesInFlight(): () => number {
    let most = 0;
    const observe = service.service.metrics.observePasswordHashesInFlight.bind(service.service.metrics);
    vi.spyOn(service.service.metrics, 'observePasswordHashesInFlight').mockImplementation((running) => {
      most = Math.max(most, running);
      observe(running);
    });
    return () => most;
  }

  /** A wrong sign-in of its own account from its own address (the throttle holds none back): its answer. */
  async function signIn(i: number, round: string): Promise<{ status: number; retryAfter: string | null; body: string }> {
    const response = await fetch(`${service.url}/panel/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        Origin: service.url,
        'Content-Type': 'application/x-www-form-urlencoded',
        'X-Forwarded-For': `10.${round}.${i >> 8}.${i & 255}`,
      },
      body: new URLSearchParams({ email: `user${i}@busy.example`, password: 'some wrong password' }),
    });
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.text() };
  }

  async function refusedCount(): Promise<number> {
    const text = await (await fetch(`${service.url}/metrics`)).text();
    return Number(/^cps_password_hashes_refused_total (\d+)$/m.exec(text)?.[1]);
  }

  it('runs at most CPS_PANEL_PASSWORD_HASHES_AT_ONCE hashes at once and refuses past the queue with 503 and Retry-After', async () => {
    limits.queue = 3;
    const most = watchHashesInFlight();
    const refusedBefore = await refusedCount();
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => signIn(i, '1')));
    expect(most()).toBe(1);
    const refused = answers.filter((a) => a.status === 503);
    // At least the first hash and its queue were checked; the rest, arriving while they waited, were refused.
    expect(answers.filter((a) => a.status === 401).length).toBeGreaterThanOrEqual(1 + limits.queue);
    expect(refused.length).toBeGreaterThan(0);
    expect(answers.every((a) => a.status === 401 || a.status === 503)).toBe(true);
    for (const answer of refused) {
      expect(answer.retryAfter).toBe('1');
      expect(answer.body).toContain('checking as many passwords as it can');
    }
    expect((await refusedCount()) - refusedBefore).toBe(refused.length);
  });

  it('answers a gzip export while sign-ins still wait for their hashes', async () => {
    limits.queue = 100;
    const most = watchHashesInFlight();
    let answered = 0;
    const flood = Array.from({ length: 24 }, (_, i) =>
      signIn(i, '2').then((answer) => {
        answered++;
        return answer;
      }),
    );
    // Once one sign-in is answered, the others' hashes are under way or waiting: the pool is as busy as they make it.
    await Promise.race(flood);
    const answeredBefore = answered;
    const response = await fetch(`${service.url}/v1/products/export?store=de`, {
      headers: { Authorization: `Bearer ${key}`, 'Accept-Encoding': 'gzip' },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-encoding')).toBe('gzip');
    const lines = (await response.text()).trimEnd().split('\n');
    expect(lines).toHaveLength(51);
    // The export's coding did not queue behind the hashes: most sign-ins are still waiting for theirs.
    const stillWaiting = 24 - answered;
    expect(stillWaiting).toBeGreaterThan((24 - answeredBefore) / 2);
    const answers = await Promise.all(flood);
    expect(answers.every((a) => a.status === 401)).toBe(true);
    expect(most()).toBe(1);
  });
});
