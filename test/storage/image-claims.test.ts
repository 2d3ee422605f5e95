// Fair image claims on either engine (storage port, claimDueImageMirrors): merchants
// take turns, the one with the fewest fetches first; a merchant's origins take turns; nothing is
// claimed past the caps per merchant and per origin of a merchant, counting the fetches busy.
import { describe, expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import { storagePerTest } from '../support/engine.js';

const AT = '2026-11-26T08:00:00.000Z';
const NOW = '2026-11-26T09:00:00.000Z';
const LEASE = '2026-11-26T09:01:00.000Z';

let storage: CatalogStorage;
storagePerTest('image-claims', (fresh) => ({ storage } = fresh));

async function merchantWithImages(name: string, urls: string[]): Promise<number> {
  const merchant = await storage.createMerchant({ name, sku_pattern: null, owner_emails: [], created_at: AT });
  // One by one, a second apart: oldest first within the merchant.
  for (const [i, url] of urls.entries())
    await storage.ensureImageMirrors(merchant.id, [url], `2026-11-26T08:00:${String(i).padStart(2, '0')}.000Z`);
  return merchant.id;
}

const claimed = (images: { merchant_id: number; url: string }[]) => images.map((i) => [i.merchant_id, i.url]);

describe('fair image claims', () => {
  it('takes turns between merchants, then between the origins of a merchant, oldest first, with each origin', async () => {
    const noisy = await merchantWithImages('Noisy', [
      'https://slow.example/1.png',
      'https://slow.example/2.png',
      'https://slow.example/3.png',
      'https://SLOW.example/4.png',
      'https://cdn.example:8443/a.png',
    ]);
    const quiet = await merchantWithImages('Quiet', ['https://slow.example/q.png']);
    const due = await storage.claimDueImageMirrors(NOW, 10, LEASE, { perMerchant: 10, perOrigin: 10, busy: [] });
    expect(claimed(due)).toEqual([
      [noisy, 'https://slow.example/1.png'],
      [quiet, 'https://slow.example/q.png'],
      [noisy, 'https://cdn.example:8443/a.png'],
      [noisy, 'https://slow.example/2.png'],
      [noisy, 'https://slow.example/3.png'],
      [noisy, 'https://SLOW.example/4.png'],
    ]);
    expect(due.map((i) => i.origin)).toEqual([
      'https://slow.example',
      'https://slow.example',
      'https://cdn.example:8443',
      'https://slow.example',
      'https://slow.example',
      'https://slow.example',
    ]);
  });

  it("alternates a merchant's origins claim after claim while their fetches run, though one origin's backlog was queued first", async () => {
    const merchant = await merchantWithImages('Backlog', [
      ...Array.from({ length: 6 }, (_, i) => `https://dead.example/${i}.png`),
      'https://cdn.example/a.png',
      'https://cdn.example/b.png',
      'https://cdn.example/c.png',
    ]);
    // One free slot at a time, the fetches claimed before still running (busy), as the mirror claims.
    const busy = new Map<string, number>();
    const origins: string[] = [];
    for (let n = 0; n < 6; n++) {
      const [image] = await storage.claimDueImageMirrors(NOW, 1, LEASE, {
        perMerchant: 6,
        perOrigin: 3,
        busy: [...busy].map(([origin, fetching]) => ({ merchant_id: merchant, origin, fetching })),
      });
      origins.push(image!.origin);
      busy.set(image!.origin, (busy.get(image!.origin) ?? 0) + 1);
    }
    expect(origins).toEqual([
      'https://dead.example',
      'https://cdn.example',
      'https://dead.example',
      'https://cdn.example',
      'https://dead.example',
      'https://cdn.example',
    ]);
  });

  it('claims nothing past the caps per merchant and per origin of a merchant, counting the fetches busy, and leases what it claims', async () => {
    const noisy = await merchantWithImages('Noisy', [
      'https://slow.example/1.png',
      'https://slow.example/2.png',
      'https://slow.example/3.png',
      'https://cdn.example/a.png',
      'https://cdn.example/b.png',
    ]);
    const quiet = await merchantWithImages('Quiet', ['https://slow.example/q1.png', 'https://slow.example/q2.png']);
    // The noisy merchant has two fetches from slow.example running: that origin is full for it, not for the other merchant.
    const busy = [{ merchant_id: noisy, origin: 'https://slow.example', fetching: 2 }];
    const first = await storage.claimDueImageMirrors(NOW, 10, LEASE, { perMerchant: 3, perOrigin: 2, busy });
    expect(claimed(first)).toEqual([
      [quiet, 'https://slow.example/q1.png'],
      [quiet, 'https://slow.example/q2.png'],
      [noisy, 'https://cdn.example/a.png'],
    ]);
    // Leased: not claimed again; with the noisy merchant at its cap, nothing more of it.
    const second = await storage.claimDueImageMirrors(NOW, 10, LEASE, {
      perMerchant: 3,
      perOrigin: 2,
      busy: [...busy, { merchant_id: noisy, origin: 'https://cdn.example', fetching: 1 }],
    });
    expect(second).toEqual([]);
    // Without fetches busy: a merchant's turn comes after the merchants with fewer, up to the caps.
    expect(claimed(await storage.claimDueImageMirrors(NOW, 10, LEASE, { perMerchant: 3, perOrigin: 2, busy: [] }))).toEqual([
      [noisy, 'https://slow.example/1.png'],
      [noisy, 'https://cdn.example/b.png'],
      [noisy, 'https://slow.example/2.png'],
    ]);
    expect(await storage.claimDueImageMirrors(NOW, 1, LEASE)).toMatchObject([{ merchant_id: noisy, url: 'https://slow.example/3.png' }]);
  });
});
