// The panel's sign-in throttle under concurrency, over real HTTP on either engine: each attempt is
// reserved (counted and recorded as a failure in one step) before its password or token is checked,
// so however many guesses arrive at once, no more are checked than the limits allow (5 per account
// and address, 20 per address); the rest answer 429 with Retry-After without being checked. Every
// spelling of an address counts as that address. The clients' addresses come from X-Forwarded-For,
// sent through 127.0.0.1 as a trusted proxy (CPS_TRUSTED_PROXIES).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignInThrottle } from '../../src/admin/sign-in-throttle.js';
import { severalConnections } from '../support/engine.js';
import { startTestService, type TestService } from '../support/service.js';

const PASSWORD = 'correct horse battery staple';

describe('sign-in throttle under concurrent guesses', () => {
  let service: TestService;

  beforeAll(async () => {
    // The hashing queue is long enough here that every checked guess is hashed (no 503: password-hashing.test.ts).
    service = await startTestService({ config: { trustedProxies: ['127.0.0.1'], panel: { passwordHashes: { atOnce: 2, queue: 200 } } } });
    const merchant = await service.admin.createMerchant({ name: 'Guarded Outdoor' });
    const accounts = service.service.accounts;
    const invitation = await accounts.invite({ kind: 'operator' }, merchant.id, { email: 'ana@guarded.example', role: 'owner' });
    await accounts.acceptInvitation(invitation.token, PASSWORD);
  }, 60_000);
  afterAll(() => service.close());

  /** One sign-in form posted from `address` (as the trusted proxy forwards it): its status and Retry-After. */
  async function post(path: string, form: Record<string, string>, address: string): Promise<{ status: number; retryAfter: string | null }> {
    const response = await fetch(`${service.url}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded', 'X-Forwarded-For': address },
      body: new URLSearchParams(form),
    });
    await response.arrayBuffer();
    return { status: response.status, retryAfter: response.headers.get('retry-after') };
  }

  const signIn = (email: string, password: string, address: string) => post('/panel/login', { email, password }, address);
  const signInOperator = (token: string, address: string) => post('/panel/login/operator', { admin_token: token }, address);

  /** How many answers had each status. */
  const tally = (answers: { status: number }[]) => {
    const counts: Record<number, number> = {};
    for (const { status } of answers) counts[status] = (counts[status] ?? 0) + 1;
    return counts;
  };

  it('checks only 5 of 100 parallel wrong passwords for one account from one address; the rest answer 429 with Retry-After', async () => {
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) => signIn('ana@guarded.example', `wrong password number ${i}`, '198.51.100.10')),
    );
    const counts = tally(answers);
    // Exactly the free failures are checked: each reservation sees every one before it.
    expect(counts).toEqual({ 401: 5, 429: 95 });
    for (const answer of answers.filter((a) => a.status === 429)) expect(Number(answer.retryAfter)).toBeGreaterThan(0);
    // The right password from there waits too; from another address it works.
    expect((await signIn('ana@guarded.example', PASSWORD, '198.51.100.10')).status).toBe(429);
    expect((await signIn('ana@guarded.example', PASSWORD, '198.51.100.11')).status).toBe(303);
  });

  it('checks only 20 of 100 parallel wrong sign-ins from one address across 100 accounts', async () => {
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) => signIn(`guess${i}@guarded.example`, 'some wrong password', '198.51.100.20')),
    );
    const counts = tally(answers);
    expect(counts).toEqual({ 401: 20, 429: 80 });
  });

  it('checks only 5 of 100 parallel wrong operator tokens from one address', async () => {
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => signInOperator(`adm_wrong_${i}`, '198.51.100.30')));
    const counts = tally(answers);
    expect(counts).toEqual({ 401: 5, 429: 95 });
  });

  it('counts every spelling of an address as that address', async () => {
    const spellings = ['2001:db8::a2', '2001:db8:0:0:0:0:0:a2', '2001:0DB8:0000::00A2', '[2001:db8:0::a2]:4711', '2001:db8::0:a2'];
    for (const address of spellings) expect((await signInOperator('adm_wrong', address)).status).toBe(401);
    // The sixth guess, in yet another spelling, is the pair's sixth failure: it waits.
    expect((await signInOperator('adm_wrong', '2001:db8:0000:0000:0000:0000:0000:00a2')).status).toBe(429);

    const mapped = ['::ffff:198.51.100.43', '198.51.100.43', '::FFFF:c633:642b', '0:0:0:0:0:ffff:198.51.100.43', '::ffff:198.51.100.43'];
    for (const address of mapped) expect((await signInOperator('adm_wrong', address)).status).toBe(401);
    expect((await signInOperator('adm_wrong', '198.51.100.43')).status).toBe(429);
  });

  severalConnections.it('reserves only 5 attempts of 100 made at once by two processes on one database', async () => {
    // Each storage is another process's view of the service's database (its own connections).
    const processes = [await service.database.open(), await service.database.open()];
    try {
      const throttles = processes.map(
        (storage) =>
          new SignInThrottle(
            storage,
            () => service.config.panel,
            () => new Date(),
          ),
      );
      const outcomes = await Promise.allSettled(
        Array.from({ length: 100 }, (_, i) => throttles[i % 2]!.reserve('user:bo@guarded.example', '198.51.100.50')),
      );
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(5);
      for (const outcome of outcomes.filter((o) => o.status === 'rejected')) expect(outcome.reason).toMatchObject({ code: 'rate_limited' });
    } finally {
      await Promise.all(processes.map((storage) => storage.close()));
    }
  });
});
