// Fair image mirroring between merchants and origins (docs/operating.md#image-mirroring):
// one merchant's 48 source images that never answer must not delay another merchant's image. The
// running mirror (started, as `serve` and `worker` run it) keeps its slots busy without waiting for
// a whole round, merchants take turns, a merchant holds at most CPS_IMAGE_MERCHANT_CONCURRENCY (3)
// of the CPS_IMAGE_CONCURRENCY (4) slots and one origin of a merchant CPS_IMAGE_ORIGIN_CONCURRENCY
// (2). Real image hosts on 127.0.0.1; the fetch time-out is short (5 s) and real, the clock real.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { adminOk, createMerchant, importNdjson, type MerchantHandle } from '../support/admin-http.js';
import { ImageServer } from '../support/image-server.js';
import { startTestService, type TestService } from '../support/service.js';

const TIMEOUT_MS = 5000;
const POLL_MS = 100;

let service: TestService | undefined;
const hosts: ImageServer[] = [];

afterEach(async () => {
  await service?.close();
  service = undefined;
  for (const host of hosts.splice(0)) await host.close();
});

async function imageHost(): Promise<ImageServer> {
  const host = await ImageServer.start();
  hosts.push(host);
  return host;
}

async function merchantWithStore(name: string): Promise<MerchantHandle> {
  const merchant = await createMerchant(service!, name);
  await adminOk(service!, 'PUT', `${merchant.base}/stores/de`, { name: 'Store de', locale: 'de-DE', currency: 'EUR' });
  return merchant;
}

async function putImages(merchant: MerchantHandle, products: Record<string, string[]>): Promise<void> {
  const response = await importNdjson(
    service!,
    merchant.id,
    Object.entries(products).map(([ref, urls]) => ({
      op: 'upsert_product',
      product: { ref, content: { de: { title: `Produkt ${ref}`, description: null } }, images: urls.map((url) => ({ url })) },
    })),
  );
  expect(response.status, response.text).toBe(200);
}

/** The product's published images in the store, as the public API serves them. */
async function publishedImages(merchant: MerchantHandle, ref: string): Promise<string[]> {
  const { id } = await adminOk(service!, 'GET', `${merchant.base}/products/${ref}`);
  const response = await service!.api(`/v1/products/${id}?store=de`, merchant.key);
  expect(response.status, response.text).toBe(200);
  return response.body.data.images;
}

describe('image mirroring shared fairly between merchants and origins', () => {
  it('documents its defaults: 4 fetches at once, 3 for one merchant, 2 from one origin of a merchant', () => {
    expect(loadConfig({}).images).toMatchObject({ concurrency: 4, merchantConcurrency: 3, originConcurrency: 2 });
    expect(loadConfig({ CPS_IMAGE_MERCHANT_CONCURRENCY: '2', CPS_IMAGE_ORIGIN_CONCURRENCY: '1' }).images).toMatchObject({
      merchantConcurrency: 2,
      originConcurrency: 1,
    });
    expect(() => loadConfig({ CPS_IMAGE_ORIGIN_CONCURRENCY: 'two' })).toThrow(/CPS_IMAGE_ORIGIN_CONCURRENCY/);
  });

  it("mirrors another merchant's image while 48 images of one merchant hang, before any of them reaches its time-out", async () => {
    service = await startTestService({
      config: { images: { timeoutMs: TIMEOUT_MS, pollIntervalMs: POLL_MS }, webhooks: { allowHosts: ['127.0.0.1'] } },
    });
    expect(service.config.images).toMatchObject({ concurrency: 4, merchantConcurrency: 3, originConcurrency: 2 });
    const shared = await imageHost(); // both merchants' supplier CDN
    const other = await imageHost(); // another origin of the noisy merchant
    const noisy = await merchantWithStore('Noisy Outfitters');
    const quiet = await merchantWithStore('Quiet Outfitters');

    // 48 sources of the noisy merchant that never answer, oldest first, then its one good image elsewhere.
    const hanging = Array.from({ length: 48 }, (_, i) => `/slow/noisy-${i}.png`);
    await putImages(noisy, Object.fromEntries(hanging.map((path, i) => [`N-${i}`, [shared.url(path)]])));
    await putImages(noisy, { 'N-GOOD': [other.url('/png/noisy-good.png')] });
    service.service.mirror.start();
    await vi.waitFor(() => expect(shared.totalHits).toBe(2), { timeout: 5000, interval: 5 });

    // The other merchant's image, on the same CDN, written while the noisy ones hang.
    await putImages(quiet, { 'Q-1': [shared.url('/png/quiet.png')] });
    const mirrored = '/media/'; // the service's copy, not the supplier URL
    await vi.waitFor(async () => expect((await publishedImages(quiet, 'Q-1'))[0]).toContain(mirrored), { timeout: 10_000, interval: 10 });
    // Both noisy fetches still hang (they end only at their time-out): the quiet image never waited
    // for them. Ordering, not a wall-clock bound, which a loaded 2-core machine cannot promise.
    expect(shared.open).toBe(2);
    // The noisy merchant's own image on another origin was not stuck behind its hanging origin either.
    expect((await publishedImages(noisy, 'N-GOOD'))[0]).toContain(mirrored);
    // The hanging origin held two of the noisy merchant's slots; the quiet merchant had its own.
    expect(hanging.reduce((n, path) => n + shared.hits(path), 0)).toBe(2);
    expect(shared.hits('/png/quiet.png')).toBe(1);

    // The hanging fetches end at their time-out and free their slots for the next two at once
    // (not after a round of every claimed image), two at a time from that origin.
    await vi.waitFor(() => expect(hanging.reduce((n, path) => n + shared.hits(path), 0)).toBe(4), {
      timeout: TIMEOUT_MS * 3,
      interval: 10,
    });
    const { pending } = await adminOk(service, 'GET', `${noisy.base}/images`);
    expect(pending).toBe(48);
    const failed = await service.storage.deadImages(noisy.id, 100);
    expect(failed).toEqual([]);
    expect(shared.maxInFlight).toBeLessThanOrEqual(3);
  });

  it('gives one merchant at most 3 of the 4 slots even across many origins, so another merchant is not kept waiting', async () => {
    service = await startTestService({
      config: { images: { timeoutMs: TIMEOUT_MS, pollIntervalMs: POLL_MS }, webhooks: { allowHosts: ['127.0.0.1'] } },
    });
    // Six origins of the noisy merchant, eight hanging sources each.
    const noisyHosts = await Promise.all(Array.from({ length: 6 }, () => imageHost()));
    const quietHost = await imageHost();
    const noisy = await merchantWithStore('Noisy Outfitters');
    const quiet = await merchantWithStore('Quiet Outfitters');
    const products: Record<string, string[]> = {};
    noisyHosts.forEach((host, h) => {
      for (let i = 0; i < 8; i++) products[`N-${h}-${i}`] = [host.url(`/slow/noisy-${h}-${i}.png`)];
    });
    await putImages(noisy, products);
    service.service.mirror.start();
    const noisyHits = () => noisyHosts.reduce((n, host) => n + host.totalHits, 0);
    await vi.waitFor(() => expect(noisyHits()).toBe(3), { timeout: 5000, interval: 5 });

    await putImages(quiet, { 'Q-1': [quietHost.url('/png/quiet.png')] });
    await vi.waitFor(async () => expect((await publishedImages(quiet, 'Q-1'))[0]).toContain('/media/'), { timeout: 10_000, interval: 10 });
    // Mirrored while the noisy merchant's three fetches still hang, none timed out nor a fourth started.
    expect(noisyHits()).toBe(3);
    expect(noisyHosts.reduce((n, host) => n + host.open, 0)).toBe(3);
  });
});
