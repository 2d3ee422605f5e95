// Re-publishing a whole catalog a chunk per transaction (catalog/publish-runs.ts): a change
// of a rate commits with a run; the run moves chunk by chunk; a run whose process stopped (between
// two chunks, or gone without a word) is resumed from its position by another process's
// `resumeStalled`, and the catalog ends exactly as re-publishing it in one go would leave it. On
// the project's engine (SQLite and PostgreSQL); two PublishRuns over one storage stand for two processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PublishRuns } from '../../src/catalog/publish-runs.js';
import { scopeToMerchant } from '../../src/storage/merchant-scope.js';
import { silentLogger } from '../../src/operations/log.js';
import { RELEASED_PUBLISH_RUN } from '../../src/storage/records.js';
import { startTestService, type TestService } from '../support/service.js';

const PRODUCTS = 60;
const CHUNK = 10;

let service: TestService;
let merchantId: number;

/** Every store's payloads, as the store's whole page reads them. */
async function payloads(): Promise<Map<number, string>> {
  const all = new Map<number, string>();
  for (const store of await service.storage.listStores(merchantId)) {
    all.set(store.id, Buffer.from((await service.storage.publishedPage(store.id, 0, Number.MAX_SAFE_INTEGER)).bytes).toString());
  }
  return all;
}

/** A change of the EUR->GBP rate written alone (no re-publishing), and a run for it held by `runs`. */
async function rateChangeWithRun(runs: PublishRuns, rate: string) {
  return service.storage.transaction(async (tx) => {
    await tx.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'GBP', rate });
    return runs.begin(tx, merchantId, null);
  });
}

/** Another process's publish runs over the same database. */
const otherProcess = () => new PublishRuns(service.storage, service.admin.publisher, () => new Date());

/** The run has ended, and left every product as re-publishing it in one go would. */
async function expectEnded(runId: number): Promise<void> {
  expect(await service.storage.publishRun(runId)).toBeUndefined();
  expect(await fullyPublished()).toBe(true);
}

/** Whether every product is as re-publishing now would leave it (nothing left to change). */
async function fullyPublished(): Promise<boolean> {
  const again = await service.storage.transaction((tx) => service.admin.publisher.publishAll(tx, scopeToMerchant(tx, merchantId)));
  return again.changes === 0;
}

beforeAll(async () => {
  service = await startTestService({ config: { limits: { publishChunk: CHUNK } } });
  const { admin } = service;
  merchantId = (await admin.createMerchant({ name: 'Run Outfitters' })).id;
  await admin.upsertStore(merchantId, 'de', {
    name: 'DE',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.upsertStore(merchantId, 'uk', {
    name: 'UK',
    locale: 'en-GB',
    currency: 'GBP',
    is_default: false,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.upsertSupplier(merchantId, 'alpine', 'Alpine');
  await admin.createCustomerGroup(merchantId, 'retail');
  await admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'GBP', rate: '0.85' });
  for (let n = 0; n < PRODUCTS; n++) {
    await admin.upsertProduct(merchantId, `P-${n}`, {
      content: { de: { title: `Zelt ${n}` }, en: { title: `Tent ${n}` } },
      offers: [{ supplier_ref: 'alpine', quantity: 3, cost: `${10 + n}.00`, currency: 'EUR' }],
    });
  }
}, 60_000);
afterAll(() => service?.close());

describe('publish runs', () => {
  it('re-price through the admin call a chunk per transaction, and leave no run behind', async () => {
    const { storage } = service;
    const changesBefore = (
      await storage.changesAfter((await storage.listStores(merchantId)).find((s) => s.slug === 'uk')!.id, { at: '', id: 0 }, 10_000)
    ).length;
    await service.admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'GBP', rate: '0.86' });
    expect(await fullyPublished()).toBe(true);
    expect(await storage.stalledPublishRuns('9999-01-01T00:00:00.000Z', 10)).toEqual([]);
    const uk = (await storage.listStores(merchantId)).find((s) => s.slug === 'uk')!;
    // One price change per product of the UK store (each chunk recorded its own).
    expect((await storage.changesAfter(uk.id, { at: '', id: 0 }, 10_000)).length - changesBefore).toBe(PRODUCTS);
  });

  it('stopped before a chunk, give the run up at once; another process resumes it from where it stood and ends it', async () => {
    const first = otherProcess();
    const run = await rateChangeWithRun(first, '0.87');
    const before = await payloads();
    void first.stop();
    await expect(first.complete(run)).rejects.toMatchObject({
      code: 'internal_error',
      detail: expect.stringMatching(/re-published when the service runs again/),
    });
    // Given up: held by no one, position unchanged, nothing re-published yet.
    expect(await service.storage.publishRun(run.id)).toMatchObject({ after_product_id: 0, leased_until: RELEASED_PUBLISH_RUN });
    expect(await payloads()).toEqual(before);
    expect(await fullyPublished()).toBe(false);

    const second = otherProcess();
    expect(await second.resumeStalled()).toBe(1);
    await second.drained();
    await expectEnded(run.id);
  });

  it('resume a run whose process went away mid-way from its position, not from the start', async () => {
    const gone = otherProcess();
    const run = await rateChangeWithRun(gone, '0.88');
    // Its driver re-published two chunks, then vanished (its hold ran out).
    const summary = { resolved: 0, changes: 0 };
    let after = 0;
    for (let chunk = 0; chunk < 2; chunk++) {
      after = (await service.storage.transaction((tx) =>
        service.admin.publisher.publishAfter(tx, scopeToMerchant(tx, merchantId), null, after, summary),
      ))!;
    }
    await service.storage.updatePublishRun(run.id, { after_product_id: after, leased_until: '2000-01-01T00:00:00.000Z' });
    // Not yet stalled for a clock before its hold ends; stalled after.
    expect((await service.storage.stalledPublishRuns('1999-01-01T00:00:00.000Z', 10)).map((r) => r.id)).toEqual([]);

    const next = otherProcess();
    const resolvedBefore = summary.resolved;
    expect(resolvedBefore).toBe(2 * CHUNK * 2);
    expect(await next.resumeStalled()).toBe(1);
    // Taken: a second look (another process) finds nothing to take.
    expect(await otherProcess().resumeStalled()).toBe(0);
    await next.drained();
    await expectEnded(run.id);
  });

  it('let the caller whose run another process took over wait until that process has ended it', async () => {
    const slow = otherProcess();
    const run = await rateChangeWithRun(slow, '0.89');
    await service.storage.updatePublishRun(run.id, { after_product_id: 0, leased_until: '2000-01-01T00:00:00.000Z' });
    const other = otherProcess();
    expect(await other.resumeStalled()).toBe(1);
    // The first driver's next chunk finds the run held by the other: it waits for its end.
    await slow.complete(run);
    expect(await service.storage.publishRun(run.id)).toBeUndefined();
    await other.drained();
    expect(await fullyPublished()).toBe(true);
  });

  it('handed off, are driven by the process that follows them, woken by the commit, while the caller only waits', async () => {
    const caller = otherProcess();
    caller.handOff = true;
    const follower = otherProcess();
    const taken: number[] = [];
    const resume = follower.resumeStalled.bind(follower);
    follower.resumeStalled = async (limit) => {
      const n = await resume(limit);
      taken.push(n);
      return n;
    };
    const stopFollowing = follower.follow(silentLogger, 60_000);
    try {
      // The follower's first look (at start) ends before the run exists: the run is taken at its wake-up.
      while (taken.length === 0) await new Promise((resolve) => setImmediate(resolve));
      const run = await rateChangeWithRun(caller, '0.90');
      expect(run).toMatchObject({ driver: '', leased_until: RELEASED_PUBLISH_RUN });
      await caller.complete(run);
      await expectEnded(run.id);
      // The follower took it, once, at a wake-up: its first look was before the run and its next
      // timed one a minute away (PostgreSQL's listener also wakes every topic once it connects).
      expect(taken[0]).toBe(0);
      expect(taken.reduce((sum, n) => sum + n, 0)).toBe(1);
      await follower.drained();
    } finally {
      stopFollowing();
    }
  });

  it('handed off with no one following, are driven by the caller after a second', async () => {
    const caller = otherProcess();
    caller.handOff = true;
    const run = await rateChangeWithRun(caller, '0.91');
    await caller.complete(run);
    await expectEnded(run.id);
  });
});
