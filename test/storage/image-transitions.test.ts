// A batch of image state changes (ImageStore.updateImageMirrors, the mirror's transition commit) on
// either engine: each change applied as updateImageMirror applies it, the last of a URL given twice,
// and the products listing any of the URLs returned once each, in id order.
import { describe, expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import type { ProductSourceDocument } from '../../src/catalog/model.js';
import { storagePerTest } from '../support/engine.js';

const AT = '2026-11-26T08:00:00.000Z';
const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((n) => `https://img.example/${n}.jpg`) as [string, string, string, string];

const source = (urls: string[]): ProductSourceDocument => ({
  eans: [],
  manufacturer: null,
  content: { de: { title: 'Zelt', description: null } },
  images: urls.map((url) => ({ url })),
  offers: [],
  own_stock: null,
  supplier_attributes: [],
  overrides: {},
  excluded_stores: [],
});

let storage: CatalogStorage;
storagePerTest('image-transitions', (fresh) => ({ storage } = fresh));

describe('image state changes in a batch', () => {
  it('applies mirrored, dead and retry changes in one call and returns the products listing them once each, in id order', async () => {
    const merchant = (await storage.createMerchant({ name: 'M', sku_pattern: null, owner_emails: [], created_at: AT })).id;
    const other = (await storage.createMerchant({ name: 'O', sku_pattern: null, owner_emails: [], created_at: AT })).id;
    const tent = await storage.upsertProductSource(merchant, 'TENT', source([a, b]), AT);
    const lamp = await storage.upsertProductSource(merchant, 'LAMP', source([b, c]), AT);
    await storage.upsertProductSource(merchant, 'BAG', source([d]), AT);
    await storage.upsertProductSource(other, 'TENT', source([a]), AT);
    const products = await storage.transaction((tx) =>
      tx.updateImageMirrors(merchant, [
        {
          url: c,
          patch: { state: 'mirrored', mirrored_url: 'https://cdn.example/c.jpg', attempts: 1, next_attempt_at: null, updated_at: AT },
        },
        { url: a, patch: { state: 'dead', last_error: 'http_404', next_attempt_at: null, updated_at: AT } },
        { url: b, patch: { state: 'dead', last_error: 'http_410', next_attempt_at: null, updated_at: AT } },
        // The last change of a URL wins: b backs off instead.
        { url: b, patch: { attempts: 2, last_error: 'timeout', next_attempt_at: '2026-11-26T08:05:00.000Z', updated_at: AT } },
      ]),
    );
    expect(products).toEqual([tent.id, lamp.id].sort((x, y) => x - y));
    const states = await storage.imageMirrors(merchant, [a, b, c, d]);
    expect([a, b, c, d].map((url) => [states.get(url)?.state, states.get(url)?.mirrored_url])).toEqual([
      ['dead', null],
      ['pending', null],
      ['mirrored', 'https://cdn.example/c.jpg'],
      ['pending', null],
    ]);
    // The other merchant's image of the same URL is untouched.
    expect((await storage.imageMirrors(other, [a])).get(a)?.state).toBe('pending');
    expect(await storage.updateImageMirrors(merchant, [])).toEqual([]);
  });
});
