// kill -9 between a write's commit and its answer: the answer to a request with an Idempotency-Key
// commits in the transaction of its write (storage/held-commits.ts), so the retry with the same key
// after a restart replays it, and nothing is applied twice. The service's answer is held back by a
// fault hook preloaded into `serve` (stall-answers.ts); the test kills it once the database shows the
// write committed.
import path from 'node:path';
import { afterAll, expect } from 'vitest';
import { FaultWorld, killAllServices, ROOT, until } from './harness.js';
import { onTestDatabase, scenarioIt } from './test-database.js';

afterAll(killAllServices);

scenarioIt(
  'replays the answer of a write killed before it was answered, and creates the endpoint once',
  () =>
    onTestDatabase(async (database) => {
      const world = await FaultWorld.create({ database });
      world.preload = [path.join(ROOT, 'test', 'faults', 'stall-answers.ts')];
      await world.start();
      const merchant = await world.admin('POST', '/admin/v1/merchants', { name: 'Crash Outfitters' });
      const endpoints = `/admin/v1/merchants/${merchant.id}/webhook-endpoints`;
      const probe = await world.open();
      try {
        const key = 'stall-create-endpoint-1';
        const body = { url: world.receiver.url, events: ['price'] };
        // Never answered: the hook holds the answer back.
        const first = world.adminRequest('POST', endpoints, body, 'application/json', { 'Idempotency-Key': key });
        let answered = false;
        first.then(
          () => (answered = true),
          () => {},
        );
        // The endpoint committed, and its answer with it (one transaction: both or neither).
        await until(
          async () => Number(await probe.value('SELECT count(*) FROM webhook_endpoints')) === 1,
          30_000,
          () => 'the endpoint was never created',
        );
        const [kept] = await probe.rows<{ status: number; owner: string | null; body: string }>(
          'SELECT status, owner, body FROM idempotency_keys WHERE key = ?',
          [key],
        );
        expect(kept).toMatchObject({ status: 201, owner: null });
        expect(answered).toBe(false);
        await world.crash();

        world.preload = [];
        await world.restart();
        const retry = await world.adminRequest('POST', endpoints, body, 'application/json', { 'Idempotency-Key': key });
        expect(retry.status).toBe(201);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        const replayed = (await retry.json()) as { id: number; secret: string };
        expect(replayed).toEqual(JSON.parse(kept!.body));
        // Applied once: one endpoint, the one the answer names, audited once.
        expect(await probe.rows('SELECT id FROM webhook_endpoints')).toEqual([{ id: expect.anything() }]);
        expect(Number(await probe.value('SELECT id FROM webhook_endpoints'))).toBe(replayed.id);
        expect(Number(await probe.value("SELECT count(*) FROM audit_log WHERE action = 'endpoint.create'"))).toBe(1);
      } finally {
        await probe.close();
        await world.close();
      }
    }),
  120_000,
);
