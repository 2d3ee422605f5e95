// Several image mirrors on one PostgreSQL database: each a service with its own
// pool, as separate processes run them, claiming image work from one table.
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ConfigOverrides } from '../../src/config.js';
import { adminOk, createMerchant, importNdjson, type MerchantHandle } from '../support/admin-http.js';
import { ImageServer } from '../support/image-server.js';
import { startTestPostgres, type TestPostgres } from '../storage/pg-server.js';
import { startPgServices, type PgServices } from '../webhooks/pg-services.js';

let postgres: TestPostgres;
let world: PgServices | undefined;
let images: ImageServer | undefined;

beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(async () => {
  await postgres?.stop();
});
afterEach(async () => {
  await world?.close();
  world = undefined;
  await images?.close();
  images = undefined;
});

async function twoMirrors(imageConfig: ConfigOverrides['images'] = {}) {
  world = await startPgServices(postgres, 2, { images: { timeoutMs: 2000, concurrency: 1, ...imageConfig } });
  images = await ImageServer.start();
  const merchant: MerchantHandle = await createMerchant(world.admin, 'Mirror Outfitters');
  await adminOk(world.admin, 'PUT', `${merchant.base}/stores/de`, { name: 'Store de', locale: 'de-DE', currency: 'EUR' });
  const importProducts = async (products: Record<string, string[]>) => {
    const response = await importNdjson(
      world!.admin,
      merchant.id,
      Object.entries(products).map(([ref, paths]) => ({
        op: 'upsert_product',
        product: {
          ref,
          content: { de: { title: `Produkt ${ref}`, description: null } },
          images: paths.map((p) => ({ url: images!.url(p) })),
        },
      })),
    );
    expect(response.status, response.text).toBe(200);
  };
  const [a, b] = world.services as [PgServices['services'][0], PgServices['services'][0]];
  return { merchant, importProducts, a, b };
}

describe('several image mirrors on one PostgreSQL database', () => {
  it('fetch each image once: a claim leases the images it takes, and the other mirror takes the next ones', async () => {
    const { merchant, importProducts, a, b } = await twoMirrors();
    const products: Record<string, string[]> = {};
    for (let i = 0; i < 15; i++) products[`IMG-${i}`] = [`/png/p${i}-front.png`, `/png/p${i}-back.png`];
    await importProducts(products);
    const paths = Object.values(products).flat();

    // Both mirrors claim at once, round after round (concurrency 1: eight images a claim).
    let triedByA = 0;
    let triedByB = 0;
    for (;;) {
      const [byA, byB] = await Promise.all([a.mirror.tick(), b.mirror.tick()]);
      triedByA += byA;
      triedByB += byB;
      if (byA + byB === 0) break;
    }
    expect(triedByA + triedByB).toBe(paths.length);
    expect(triedByA).toBeGreaterThan(0);
    expect(triedByB).toBeGreaterThan(0);
    for (const path of paths) expect(images!.hits(path), path).toBe(1);
    expect(await a.storage.imageStateCounts(merchant.id)).toEqual({ pending: 0, mirrored: paths.length, dead: 0 });
  });

  it('gives back the images of a batch a stopped mirror did not try, for the other mirror at once', async () => {
    const { merchant, importProducts, a, b } = await twoMirrors({ timeoutMs: 300, pollIntervalMs: 10 });
    // The first image hangs until the time-out: the mirror is stopped while it fetches it.
    images!.set('/png/back-1.png', 'hang-before-headers');
    await importProducts({ BACK: ['/png/back-1.png', '/png/back-2.png', '/png/back-3.png'] });
    a.mirror.start();
    await vi.waitFor(() => expect(images!.hits('/png/back-1.png')).toBe(1), { timeout: 5000, interval: 1 });
    await a.stopWork();
    // The two it did not try are due at once for the other mirror, and so is the one whose fetch the
    // stop ended (given back as it was before the claim, no attempt counted): it hangs again there.
    expect(await b.mirror.tick()).toBe(3);
    expect(['/png/back-1.png', '/png/back-2.png', '/png/back-3.png'].map((path) => images!.hits(path))).toEqual([2, 1, 1]);
    expect(await a.storage.imageStateCounts(merchant.id)).toEqual({ pending: 1, mirrored: 2, dead: 0 });
  });

  it('wakes a mirror on a commit in another process (NOTIFY) long before its poll interval', async () => {
    const { merchant, importProducts, b } = await twoMirrors({ pollIntervalMs: 60_000 });
    b.mirror.start();
    await world!.storages[1]!.listening();
    await importProducts({ WAKE: ['/png/wake.png'] });
    await vi.waitFor(async () => expect(await b.storage.imageStateCounts(merchant.id)).toEqual({ pending: 0, mirrored: 1, dead: 0 }), {
      timeout: 10_000,
      interval: 20,
    });
    expect(images!.hits('/png/wake.png')).toBe(1);
  });

  it("commits a merchant's images while another merchant's commit waits for its locks", async () => {
    const { merchant, importProducts, a } = await twoMirrors({ concurrency: 2 });
    const other = await createMerchant(world!.admin, 'Other Outfitters');
    await adminOk(world!.admin, 'PUT', `${other.base}/stores/de`, { name: 'Store de', locale: 'de-DE', currency: 'EUR' });
    await importProducts({ MINE: ['/png/mine.png'] });
    const imported = await importNdjson(world!.admin, other.id, [
      {
        op: 'upsert_product',
        product: {
          ref: 'THEIRS',
          content: { de: { title: 'Theirs', description: null } },
          images: [{ url: images!.url('/png/theirs.png') }],
        },
      },
    ]);
    expect(imported.status, imported.text).toBe(200);
    // Another transaction holds the first merchant's change sequencer (as a commit of its own would).
    const holder = new pg.Client(world!.url);
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM change_sequences WHERE merchant_id = $1 FOR UPDATE', [merchant.id]);
    const tick = a.mirror.tick();
    try {
      // Both images fetched in one batch; the other merchant's commit does not wait for the first's.
      await vi.waitFor(async () => expect(await a.storage.imageStateCounts(other.id)).toEqual({ pending: 0, mirrored: 1, dead: 0 }), {
        timeout: 5000,
        interval: 20,
      });
      expect(images!.hits('/png/mine.png')).toBe(1);
      expect(await a.storage.imageStateCounts(merchant.id)).toEqual({ pending: 1, mirrored: 0, dead: 0 });
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    expect(await tick).toBe(2);
    expect(await a.storage.imageStateCounts(merchant.id)).toEqual({ pending: 0, mirrored: 1, dead: 0 });
  });
});
