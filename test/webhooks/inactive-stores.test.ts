// Inactive stores (docs/decisions.md#stores: only active stores are
// listed and readable): an inactive store is neither recorded in the change feed nor delivered;
// activating it publishes it (its products' changes recorded and delivered, through a chunked
// publish run); deactivating it records and delivers nothing, and activating it again catches up
// on what changed meanwhile, a product deleted meanwhile as `removed`. Real receivers on 127.0.0.1,
// the real service on the project's engine, a fake clock.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FEED_START } from '../../src/changes/feed.js';
import type { WebhookPayload } from '../support/receiver.js';
import { SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld;
afterEach(async () => {
  vi.restoreAllMocks();
  await world?.close();
});

const ARCHIVE = { name: 'Old shop', locale: 'de-DE', currency: 'EUR' };

type Event = WebhookPayload['event'];

/** Per (event, store_id): the product ids delivered, sorted. */
function delivered(payloads: WebhookPayload[]): Record<string, number[]> {
  const byKey: Record<string, number[]> = {};
  for (const { event, store_id, product_ids } of payloads) (byKey[`${event}:${store_id}`] ??= []).push(...product_ids);
  for (const ids of Object.values(byKey)) ids.sort((a, b) => a - b);
  return byKey;
}

/** The changes recorded in the store's feed after a position, as [product id, change type]. */
async function feedOf(storeId: number, after = FEED_START): Promise<[number, Event][]> {
  const rows = await world.service.storage.changesAfter(storeId, after, 10_000);
  return rows.map((row) => [row.product_id, row.change_type]);
}

async function archiveStore(active: boolean): Promise<number> {
  const { base } = world.merchant;
  const response = await world.service.adminApi('PUT', `${base}/stores/archive`, { ...ARCHIVE, active });
  expect(response.status, response.text).toBe(200);
  return response.body.id as number;
}

describe('a store created inactive', () => {
  it('gets no delivery naming its store_id at an all-stores endpoint, and nothing in its feed, while the active stores get theirs', async () => {
    world = await startWebhookWorld({ stores: ['de', 'pl'] });
    const archive = await archiveStore(false);
    const allStores = await world.receiver();
    await world.register(allStores);
    const first = await world.putProduct('BP-40');
    const second = await world.putProduct('TENT-2');
    await world.putProduct('BP-40', { title: 'Rucksack', cost: '12.00' });
    await world.deleteProduct('TENT-2');
    await world.after(2 * SECOND);

    const { de, pl } = world.stores;
    expect(allStores.payloads.map((p) => p.store_id)).not.toContain(archive);
    expect(delivered(allStores.payloads)).toEqual({
      [`price:${de!.id}`]: [first, second],
      [`content:${de!.id}`]: [first, second],
      [`price:${pl!.id}`]: [first, second],
      [`content:${pl!.id}`]: [first, second],
      'removed:null': [second],
    });
    expect(await feedOf(archive)).toEqual([]);
    expect([...(await world.service.storage.publishedHashesAfter(archive, 0, 100)).keys()]).toEqual([]);
    // Its slug answers 404 and /v1/stores does not list it (the spec's rule, unchanged).
    const feed = await world.service.api('/v1/changes?store=archive', world.merchant.key);
    expect([feed.status, feed.body.code]).toEqual([404, 'store_not_found']);
    const stores = await world.service.api('/v1/stores', world.merchant.key);
    expect(stores.body.data.map((s: { id: number }) => s.id)).not.toContain(archive);
  });

  it('sends nothing to an endpoint scoped to it until it is activated; activating it records and delivers its products as new (price and content)', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const archive = await archiveStore(false);
    const allStores = await world.receiver();
    const archiveOnly = await world.receiver();
    await world.register(allStores);
    await world.register(archiveOnly, { store: 'archive' });
    const first = await world.putProduct('BP-40');
    const second = await world.putProduct('TENT-2');
    await world.after(2 * SECOND);
    expect(archiveOnly.count).toBe(0);
    const before = allStores.count;

    await archiveStore(true);
    await world.after(2 * SECOND);
    expect(delivered(archiveOnly.payloads)).toEqual({ [`price:${archive}`]: [first, second], [`content:${archive}`]: [first, second] });
    expect(delivered(allStores.payloads.slice(before))).toEqual({
      [`price:${archive}`]: [first, second],
      [`content:${archive}`]: [first, second],
    });
    // The feed lists them; the store is readable.
    const feed = await world.service.api('/v1/changes?store=archive', world.merchant.key);
    expect(feed.status, feed.text).toBe(200);
    expect(feed.body.changes.map((c: { product_id: number; change_type: string }) => [c.product_id, c.change_type])).toEqual([
      [first, 'content'],
      [second, 'content'],
    ]);
    const page = await world.service.api('/v1/products?store=archive', world.merchant.key);
    expect(page.body.data.map((p: { id: number }) => p.id)).toEqual([first, second]);
  });
});

describe('deactivating a store', () => {
  it('records and delivers nothing for it (no removed either); activating it again delivers exactly what changed meanwhile, a product deleted meanwhile as removed', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const archive = await archiveStore(true);
    const archiveOnly = await world.receiver();
    await world.register(archiveOnly, { store: 'archive' });
    const kept = await world.putProduct('BP-40');
    const changed = await world.putProduct('LAMP-1');
    const deleted = await world.putProduct('TENT-2');
    await world.after(2 * SECOND);
    const [last] = (await world.service.storage.changesAfter(archive, FEED_START, 10_000)).slice(-1);
    const cursor = { at: last!.created_at, id: last!.id };
    const deliveredBefore = archiveOnly.count;

    await archiveStore(false);
    await world.putProduct('LAMP-1', { title: 'Stirnlampe neu' });
    await world.deleteProduct('TENT-2');
    const added = await world.putProduct('MUG-1');
    await world.after(2 * SECOND);
    expect(archiveOnly.count).toBe(deliveredBefore);
    expect(await feedOf(archive, cursor)).toEqual([]);
    expect((await world.service.api(`/v1/products/${kept}?store=archive`, world.merchant.key)).status).toBe(404);

    await archiveStore(true);
    await world.after(2 * SECOND);
    expect(delivered(archiveOnly.payloads.slice(deliveredBefore))).toEqual({
      [`content:${archive}`]: [changed, added],
      [`price:${archive}`]: [added],
      [`removed:${archive}`]: [deleted],
    });
    // A cursor taken before the deactivation resumes exactly: what changed, and nothing else.
    const since = (await feedOf(archive, cursor)).map(([id, type]) => `${id}:${type}`).sort();
    expect(since).toEqual([`${changed}:content`, `${deleted}:removed`, `${added}:content`, `${added}:price`].sort());
    const page = await world.service.api('/v1/products?store=archive', world.merchant.key);
    expect(page.body.data.map((p: { id: number; title: string }) => [p.id, p.title])).toEqual([
      [kept, 'Produkt BP-40'],
      [changed, 'Stirnlampe neu'],
      [added, 'Produkt MUG-1'],
    ]);
  });
});

describe('at catalog scale', () => {
  it('activates a store through a chunked publish run (a transaction per chunk), and deactivates it without re-publishing anything', async () => {
    const CHUNK = 4;
    world = await startWebhookWorld({ stores: ['de'], config: { limits: { publishChunk: CHUNK } } });
    const archive = await archiveStore(false);
    const ids: number[] = [];
    for (let n = 0; n < 10; n++) ids.push(await world.putProduct(`P-${n}`));
    const { admin } = world.service;
    const chunks = vi.spyOn(admin.publisher, 'publishAfter');
    const runs = vi.spyOn(admin.publishRuns, 'begin');
    const whole = vi.spyOn(admin.publisher, 'publishAll');

    await archiveStore(true);
    // 10 products in chunks of 4: three chunks, then the call that finds none left.
    expect(chunks.mock.calls.map((call) => [call[2], call[3]])).toEqual([
      [[archive], 0],
      [[archive], ids[3]],
      [[archive], ids[7]],
      [[archive], ids[9]],
    ]);
    expect(runs).toHaveBeenCalledTimes(1);
    expect(whole).not.toHaveBeenCalled();
    expect((await feedOf(archive)).filter(([, type]) => type === 'content').map(([id]) => id)).toEqual(ids);

    chunks.mockClear();
    runs.mockClear();
    await archiveStore(false);
    expect(chunks).not.toHaveBeenCalled();
    expect(runs).not.toHaveBeenCalled();

    // Deleted while inactive: more kept payloads without a product than one chunk holds.
    const [last] = (await world.service.storage.changesAfter(archive, FEED_START, 10_000)).slice(-1);
    for (let n = 0; n < 7; n++) await world.deleteProduct(`P-${n}`);
    const added = [await world.putProduct('Q-0'), await world.putProduct('Q-1')];
    await archiveStore(true);
    const since = (await feedOf(archive, { at: last!.created_at, id: last!.id })).map(([id, type]) => `${id}:${type}`).sort();
    expect(since).toEqual(
      [...ids.slice(0, 7).map((id) => `${id}:removed`), ...added.flatMap((id) => [`${id}:content`, `${id}:price`])].sort(),
    );
    expect([...(await world.service.storage.publishedHashesAfter(archive, 0, 100)).keys()]).toEqual([...ids.slice(7), ...added]);
    expect(chunks.mock.calls.length).toBeGreaterThanOrEqual(Math.ceil(12 / CHUNK));
  });
});
