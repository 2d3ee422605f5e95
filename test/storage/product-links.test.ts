// The links and counts migration 16 keeps always say what a recount from the sources
// says: after any sequence of product upserts and deletes and image state changes, the products
// listing each image, the products excluding each store, the referenced suppliers and the images
// per state, and the currencies costs are in (migration 33), equal what parsing every source finds
// (what the statements before them computed).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import type { ImageState, ProductSourceDocument } from '../../src/catalog/model.js';
import { storagePerTest, TEST_ENGINE } from '../support/engine.js';

const AT = '2026-11-26T08:00:00.000Z';
const URLS = ['https://a.example/1.jpg', 'https://a.example/2.jpg', 'https://B.example:8443/3.jpg', 'https://b.example:8443/4.jpg'];
const SUPPLIERS = ['alpine', 'baltic'];
const SLUGS = ['de', 'uk'];
const REFS = ['P-1', 'P-2', 'P-3', 'P-4'];
const CURRENCIES = ['EUR', 'USD', 'GBP'];

let storage: CatalogStorage;
storagePerTest('product-links', (fresh) => ({ storage } = fresh));

const sourceArbitrary: fc.Arbitrary<ProductSourceDocument> = fc
  .record({
    images: fc.uniqueArray(fc.constantFrom(...URLS), { maxLength: 3 }).map((urls) => urls.map((url) => ({ url }))),
    offers: fc
      .uniqueArray(fc.record({ supplier_ref: fc.constantFrom(...SUPPLIERS), currency: fc.constantFrom('EUR', 'USD') }), {
        maxLength: 2,
        selector: (o) => o.supplier_ref,
      })
      .map((offers) => offers.map(({ supplier_ref, currency }) => ({ supplier_ref, quantity: 1, cost: '1.00', currency }))),
    attributes: fc
      .uniqueArray(fc.constantFrom(...SUPPLIERS), { maxLength: 1 })
      .map((refs) => refs.map((supplier_ref) => ({ supplier_ref, key: 'weight', value: '1' }))),
    excluded: fc.uniqueArray(fc.constantFrom(...SLUGS), { maxLength: 2 }),
    ownStock: fc.option(fc.constantFrom<string | null>('GBP', 'EUR', null), { nil: undefined }),
  })
  .map(({ images, offers, attributes, excluded, ownStock }) => ({
    eans: [],
    manufacturer: null,
    content: { de: { title: 'T', description: null } },
    images,
    offers,
    own_stock: ownStock === undefined ? null : { quantity: 1, cost: ownStock === null ? null : '2.00', currency: ownStock },
    supplier_attributes: attributes,
    overrides: {},
    excluded_stores: excluded,
  }));

type Step =
  | { op: 'upsert'; ref: string; source: ProductSourceDocument }
  | { op: 'delete'; ref: string }
  | { op: 'state'; url: string; state: ImageState };

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ op: fc.constant('upsert' as const), ref: fc.constantFrom(...REFS), source: sourceArbitrary }),
  fc.record({ op: fc.constant('delete' as const), ref: fc.constantFrom(...REFS) }),
  fc.record({
    op: fc.constant('state' as const),
    url: fc.constantFrom(...URLS),
    state: fc.constantFrom<ImageState>('pending', 'mirrored', 'dead'),
  }),
);

/**
 * Runs of consecutive upserts with distinct refs, as a bulk import writes them (upsertProductSources);
 * every other step alone.
 */
function batches(steps: Step[]): (Step | Extract<Step, { op: 'upsert' }>[])[] {
  const out: (Step | Extract<Step, { op: 'upsert' }>[])[] = [];
  let run: Extract<Step, { op: 'upsert' }>[] | null = null;
  for (const step of steps) {
    if (step.op !== 'upsert') {
      run = null;
      out.push(step);
      continue;
    }
    if (!run || run.some((s) => s.ref === step.ref)) out.push((run = []));
    run.push(step);
  }
  return out;
}

describe(`the links and counts kept with the sources (${TEST_ENGINE})`, () => {
  for (const batched of [false, true]) {
    it(`equal a recount from every source after any sequence of upserts, deletes and image state changes${batched ? ' (upserts in batches)' : ''}`, async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(stepArbitrary, { minLength: 1, maxLength: 14 }), async (steps) => {
          // A merchant of its own per run: the runs share the database.
          const merchant = await storage.createMerchant({
            name: `M${++run}${batched ? 'b' : ''}`,
            sku_pattern: null,
            owner_emails: [],
            created_at: AT,
          });
          const sources = new Map<string, { id: number; source: ProductSourceDocument }>();
          const states = new Map<string, ImageState>();
          for (const step of batched ? batches(steps) : steps) {
            if (Array.isArray(step)) {
              // The same ids as one upsert after another: existing refs keep theirs, new ones in order.
              const results = await storage.transaction((tx) =>
                tx.upsertProductSources(
                  merchant.id,
                  step.map(({ ref, source }) => ({ ref, source })),
                  AT,
                ),
              );
              expect(results.map((r) => r.created)).toEqual(step.map((s) => !sources.has(s.ref)));
              // Unchanged: the product existed with this very source.
              expect(results.map((r) => r.unchanged)).toEqual(
                step.map((s) => sources.has(s.ref) && JSON.stringify(sources.get(s.ref)!.source) === JSON.stringify(s.source)),
              );
              for (const [i, s] of step.entries()) {
                if (sources.has(s.ref)) expect(results[i]!.id).toBe(sources.get(s.ref)!.id);
                sources.set(s.ref, { id: results[i]!.id, source: s.source });
                for (const image of s.source.images) if (!states.has(image.url)) states.set(image.url, 'pending');
              }
              const created = results.filter((r) => r.created).map((r) => r.id);
              expect(created).toEqual([...created].sort((a, b) => a - b));
            } else if (step.op === 'upsert') {
              const { id } = await storage.transaction((tx) => tx.upsertProductSource(merchant.id, step.ref, step.source, AT));
              sources.set(step.ref, { id, source: step.source });
              for (const image of step.source.images) if (!states.has(image.url)) states.set(image.url, 'pending');
            } else if (step.op === 'delete') {
              const product = sources.get(step.ref);
              if (!product) continue;
              await storage.transaction((tx) => tx.deleteProduct(merchant.id, product.id));
              sources.delete(step.ref);
            } else if (states.has(step.url)) {
              await storage.updateImageMirror(merchant.id, step.url, {
                state: step.state,
                updated_at: AT,
                next_attempt_at: step.state === 'pending' ? AT : null,
              });
              states.set(step.url, step.state);
            }
          }
          const products = [...sources.values()].sort((a, b) => a.id - b.id);
          for (const url of URLS) {
            expect(await storage.productIdsWithImage(merchant.id, url)).toEqual(
              products.filter((p) => p.source.images.some((i) => i.url === url)).map((p) => p.id),
            );
          }
          for (const slug of SLUGS) {
            expect((await storage.productsExcludedFrom(merchant.id, slug)).map((p) => p.id)).toEqual(
              products.filter((p) => p.source.excluded_stores.includes(slug)).map((p) => p.id),
            );
          }
          for (const ref of SUPPLIERS) {
            expect(await storage.isSupplierReferenced(merchant.id, ref)).toBe(
              products.some(
                (p) =>
                  p.source.offers.some((o) => o.supplier_ref === ref) || p.source.supplier_attributes.some((a) => a.supplier_ref === ref),
              ),
            );
          }
          // The currencies costs are in (offers and own stock), which a changed rate can re-price.
          expect((await storage.currenciesInUse(merchant.id, CURRENCIES)).sort()).toEqual(
            CURRENCIES.filter((currency) =>
              products.some((p) => p.source.offers.some((o) => o.currency === currency) || p.source.own_stock?.currency === currency),
            ).sort(),
          );
          const listed = new Set(products.flatMap((p) => p.source.images.map((i) => i.url)));
          const expected = { pending: 0, mirrored: 0, dead: 0 };
          for (const url of listed) expected[states.get(url)!]++;
          expect(await storage.imageStateCounts(merchant.id)).toEqual(expected);
          expect((await storage.deadImages(merchant.id, 10)).map((d) => d.url).sort()).toEqual(
            [...listed].filter((url) => states.get(url) === 'dead').sort(),
          );
        }),
        { numRuns: TEST_ENGINE === 'sqlite' ? 60 : 25 },
      );
    });
  }
});

describe(`a run of upserts longer than one statement's batch (${TEST_ENGINE})`, () => {
  const longSource = (n: number, version: number): ProductSourceDocument => ({
    eans: [],
    manufacturer: null,
    content: { de: { title: `T ${n} v${version}`, description: null } },
    images: [{ url: `https://a.example/long/${n % 7}-${version}.jpg` }],
    offers: [{ supplier_ref: SUPPLIERS[n % 2]!, quantity: 1, cost: '1.00', currency: 'EUR' }],
    own_stock: null,
    supplier_attributes: [],
    overrides: {},
    excluded_stores: n % 5 === 0 ? ['de'] : [],
  });

  it('keeps the ids, the flags and the links of one upsert after another (new, changed and unchanged products mixed)', async () => {
    const merchant = await storage.createMerchant({ name: 'Long run', sku_pattern: null, owner_emails: [], created_at: AT });
    // 150 products first, then a run of 260: the first 150 again (every third changed, the rest as
    // they were) and 110 new ones.
    const first = Array.from({ length: 150 }, (_, i) => ({ ref: `L-${i}`, source: longSource(i, 1) }));
    const before = await storage.transaction((tx) => tx.upsertProductSources(merchant.id, first, AT));
    expect(before.every((r) => r.created)).toBe(true);
    const run = Array.from({ length: 260 }, (_, i) => ({ ref: `L-${i}`, source: longSource(i, i < 150 && i % 3 !== 0 ? 1 : 2) }));
    const results = await storage.transaction((tx) => tx.upsertProductSources(merchant.id, run, AT));
    expect(results.map((r) => r.created)).toEqual(run.map((_, i) => i >= 150));
    expect(results.map((r) => r.unchanged)).toEqual(run.map((_, i) => i < 150 && i % 3 !== 0));
    expect(results.slice(0, 150).map((r) => r.id)).toEqual(before.map((r) => r.id));
    const created = results.slice(150).map((r) => r.id);
    expect(created).toEqual([...created].sort((a, b) => a - b));
    expect(created[0]).toBeGreaterThan(Math.max(...before.map((r) => r.id)));
    const products = run.map((p, i) => ({ id: results[i]!.id, source: p.source })).sort((a, b) => a.id - b.id);
    for (const url of new Set(products.flatMap((p) => p.source.images.map((image) => image.url)))) {
      expect(await storage.productIdsWithImage(merchant.id, url)).toEqual(
        products.filter((p) => p.source.images.some((image) => image.url === url)).map((p) => p.id),
      );
    }
    // The images of the changed products' first sources are listed by no product any more.
    expect(await storage.productIdsWithImage(merchant.id, 'https://a.example/long/0-1.jpg')).toEqual(
      products.filter((p) => p.source.images[0]!.url === 'https://a.example/long/0-1.jpg').map((p) => p.id),
    );
    expect((await storage.productsExcludedFrom(merchant.id, 'de')).map((p) => p.id)).toEqual(
      products.filter((p) => p.source.excluded_stores.includes('de')).map((p) => p.id),
    );
    const listed = new Set(products.flatMap((p) => p.source.images.map((image) => image.url)));
    expect(await storage.imageStateCounts(merchant.id)).toEqual({ pending: listed.size, mirrored: 0, dead: 0 });
  });
});

describe(`links kept by a run whose new sources list the same links (${TEST_ENGINE})`, () => {
  const withCost = (url: string, cost: string): ProductSourceDocument => ({
    eans: [],
    manufacturer: null,
    content: { de: { title: 'T', description: null } },
    images: [{ url }],
    offers: [{ supplier_ref: 'alpine', quantity: 1, cost, currency: 'EUR' }],
    own_stock: null,
    supplier_attributes: [],
    overrides: {},
    excluded_stores: [],
  });
  const [first, second] = ['https://a.example/keyed-1.jpg', 'https://a.example/keyed-2.jpg'];

  it('a new cost keeps the links; a single write in between that changed them does not leave them stale', async () => {
    const merchant = await storage.createMerchant({ name: 'Keyed', sku_pattern: null, owner_emails: [], created_at: AT });
    const run = (url: string, cost: string) =>
      storage.transaction((tx) => tx.upsertProductSources(merchant.id, [{ ref: 'K-1', source: withCost(url, cost) }], AT));
    const id = (await run(first, '1.00'))[0]!.id;
    expect(await storage.productIdsWithImage(merchant.id, first)).toEqual([id]);
    // A new cost: the same links.
    expect(await run(first, '2.00')).toEqual([{ id, created: false, unchanged: false }]);
    expect(await storage.productIdsWithImage(merchant.id, first)).toEqual([id]);
    // A single write moves the product to the second image; a run then moves it back to the first.
    await storage.transaction((tx) => tx.upsertProductSource(merchant.id, 'K-1', withCost(second, '3.00'), AT));
    expect(await storage.productIdsWithImage(merchant.id, first)).toEqual([]);
    expect(await storage.productIdsWithImage(merchant.id, second)).toEqual([id]);
    await run(first, '4.00');
    expect(await storage.productIdsWithImage(merchant.id, first)).toEqual([id]);
    expect(await storage.productIdsWithImage(merchant.id, second)).toEqual([]);
    expect(await storage.imageStateCounts(merchant.id)).toEqual({ pending: 1, mirrored: 0, dead: 0 });
  });

  it('after a run of unchanged sources, the next run relinks the products whose links changed and links the new ones, and keeps their keys right', async () => {
    const merchant = await storage.createMerchant({ name: 'Keyed after unchanged', sku_pattern: null, owner_emails: [], created_at: AT });
    const run = (products: [string, string, string][]) =>
      storage.transaction((tx) =>
        tx.upsertProductSources(
          merchant.id,
          products.map(([ref, url, cost]) => ({ ref, source: withCost(url, cost) })),
          AT,
        ),
      );
    const [a, b] = (
      await run([
        ['U-1', first, '1.00'],
        ['U-2', first, '1.00'],
      ])
    ).map((r) => r.id);
    // Unchanged: PostgreSQL's next run compares the sources before it works out any links.
    expect(
      await run([
        ['U-1', first, '1.00'],
        ['U-2', first, '1.00'],
      ]),
    ).toEqual([
      { id: a, created: false, unchanged: true },
      { id: b, created: false, unchanged: true },
    ]);
    // U-1 a new cost (same links), U-2 moved to the second image, U-3 new.
    const [, , c] = (
      await run([
        ['U-1', first, '2.00'],
        ['U-2', second, '2.00'],
        ['U-3', second, '2.00'],
      ])
    ).map((r) => r.id);
    expect(await storage.productIdsWithImage(merchant.id, first)).toEqual([a]);
    expect(await storage.productIdsWithImage(merchant.id, second)).toEqual([b, c]);
    // Back to the first image (a run that works out its keys first): U-2 is relinked by the key its
    // relinking wrote (with U-1's key kept, a stale key would leave it on the second image).
    await run([
      ['U-2', first, '3.00'],
      ['U-3', first, '3.00'],
    ]);
    expect(await storage.productIdsWithImage(merchant.id, first)).toEqual([a, b, c]);
    expect(await storage.productIdsWithImage(merchant.id, second)).toEqual([]);
    expect(await storage.imageStateCounts(merchant.id)).toEqual({ pending: 1, mirrored: 0, dead: 0 });
  });
});
