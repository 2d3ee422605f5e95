// An image mirroring test world: the real service on a temp SQLite file with a fake clock, a
// merchant with two stores built over the admin API, a real supplier image host on 127.0.0.1
// (allowlisted, as CPS_WEBHOOK_ALLOW_HOSTS would), and a mirroring worker driven by hand (`tick()`
// after moving the clock), so backoff and the dead-after period take no real time. Every response
// passes through the contract harness.
import type { ImageOriginView } from '../../src/images/retry.js';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { CatalogPublisher } from '../../src/catalog/publish.js';
import { HttpImageFetcher, ImageMirror, type FetchOutcome, type ImageFetcher } from '../../src/images/mirror.js';
import type { OutboundClientOptions } from '../../src/outbound/client.js';
import { LocalFolderMediaStore } from '../../src/images/media-store.js';
import type { CatalogStorage } from '../../src/storage/port.js';
import { AddressGuard } from '../../src/outbound/address-guard.js';
import { adminOk, createMerchant, importNdjson, type MerchantHandle } from '../support/admin-http.js';
import { fakeClock, type FakeClock } from '../support/clock.js';
import { ImageServer } from '../support/image-server.js';
import { startTestService, type TestResponse, type TestService } from '../support/service.js';
import { listeningStorage, timingCalls } from '../support/idle-worker.js';

export { HOUR, MINUTE, SECOND, fakeClock, type FakeClock } from '../support/clock.js';

export const SLUGS = ['de', 'pl'] as const;
export type Slug = (typeof SLUGS)[number];

/**
 * The mirror's limits in these tests: small enough for a test image server to exceed quickly. Only
 * these fields are overridden: a whole `images` group from `loadConfig({})` would carry its
 * `mediaDir` (./data/media) instead of the folder beside the test database. The time-out is long
 * enough that a 404 or a 500 answered on a loaded machine is not taken for a time-out.
 */
export const IMAGE_LIMITS = { timeoutMs: 2000, maxBytes: 1024, concurrency: 2 } satisfies Partial<Config['images']>;

/** The default image settings (docs/decisions.md#images): retry waits and the dead-after period. */
export const IMAGE_DEFAULTS: Config['images'] = loadConfig({}).images;

/** A recorded change as the feed shows it: [product id, change type]. */
export type Recorded = [productId: number, changeType: 'price' | 'content' | 'removed'];

export interface MirroringStatus {
  pending: number;
  mirrored: number;
  dead: number;
  dead_images: { url: string; last_error: string | null; first_failure_at: string | null; updated_at: string }[];
}

export type ImageOriginStatus = ImageOriginView;

export interface ImageWorld {
  service: TestService;
  clock: FakeClock;
  images: ImageServer;
  merchant: MerchantHandle;
  /** The worker, with the service's image settings and the image host allowlisted. */
  mirror: ImageMirror;
  /** Every URL the mirrors fetched (or tried to), in order. */
  fetched: string[];
  /** The local media store's folder: the one the server's `/media` route reads. */
  mediaDir: string;
  /** Creates or replaces a product with these image URLs over the admin API; returns its id. */
  putProduct(ref: string, imageUrls: string[]): Promise<number>;
  /** Upserts products with these image URLs through an NDJSON import; returns their ids by ref. */
  importProducts(products: Record<string, string[]>): Promise<Record<string, number>>;
  /** The product's `images` in `GET /v1/products` of the store. */
  publicImages(productId: number, slug?: Slug): Promise<string[]>;
  /** The product's `images` in `GET /v1/products` of every store. */
  imagesInEveryStore(productId: number): Promise<Record<Slug, string[]>>;
  /** The changes `write` records in each store, read from `GET /v1/changes` (one change per window). */
  recorded(write: () => unknown): Promise<Record<Slug, Recorded[]>>;
  /** `GET .../images` over the admin API, its counts and dead images (its `origins`: `origins()`). */
  status(): Promise<MirroringStatus>;
  /** The `origins` of `GET .../images` over the admin API. */
  origins(): Promise<ImageOriginStatus[]>;
  /** The product's source images with their state (`GET .../products/{ref}`). */
  sourceImages(ref: string): Promise<{ url: string; state: string; mirrored_url: string | null }[]>;
  /** The service URL of a mirrored copy of these bytes. */
  mediaUrl(bytes: Buffer, ext: 'png' | 'jpg'): string;
  /** Files in the media folder. */
  mediaFiles(): string[];
  /**
   * A mirror like `mirror` but with another SSRF guard, storage or fetch time-out (for sources that
   * never answer, where IMAGE_LIMITS' would only be waited out); closed with the world.
   */
  otherMirror(options: { guard?: AddressGuard; storage?: CatalogStorage; timeoutMs?: number }): ImageMirror;
  close(): Promise<void>;
}

/** The real fetcher, each URL it is asked for written down first. */
class CountingFetcher implements ImageFetcher {
  constructor(
    private readonly real: HttpImageFetcher,
    private readonly log: string[],
  ) {}
  fetch(url: string): Promise<FetchOutcome> {
    this.log.push(url);
    return this.real.fetch(url);
  }
  abort(): void {
    this.real.abort();
  }
  close(): Promise<void> {
    return this.real.close();
  }
}

export async function startImageWorld(
  options: {
    start?: string;
    images?: Partial<Config['images']>;
    /** The mirrors' DNS resolver (no test sends a DNS query: names it does not answer fail as the system's would). */
    lookup?: OutboundClientOptions['lookup'];
  } = {},
): Promise<ImageWorld> {
  const clock = fakeClock(options.start);
  const service = await startTestService({
    now: clock.now,
    config: { images: { ...IMAGE_LIMITS, ...options.images }, webhooks: { allowHosts: ['127.0.0.1'] }, changes: { feedWindow: 1 } },
  });
  // The media folder sits beside the test database, so nothing is written into ./data/media.
  const mediaDir = service.config.images.mediaDir;
  expect(mediaDir).toBe(path.join(service.dir, 'media'));
  const images = await ImageServer.start();
  const mirrors: ImageMirror[] = [];
  const fetched: string[] = [];
  const newMirror = (guard: AddressGuard, storage: CatalogStorage = service.storage, timeoutMs = service.config.images.timeoutMs) => {
    const config = { ...service.config.images, timeoutMs };
    const mirror = new ImageMirror(
      storage,
      new LocalFolderMediaStore(mediaDir),
      new CountingFetcher(new HttpImageFetcher(guard, config, options.lookup), fetched),
      config,
      service.url,
      clock.now,
      new CatalogPublisher(clock.now, 2000),
    );
    mirrors.push(mirror);
    return mirror;
  };
  const mirror = newMirror(new AddressGuard(['127.0.0.1']));

  const merchant = await createMerchant(service, 'Image Outfitters');
  const { base } = merchant;
  for (const slug of SLUGS) {
    await adminOk(service, 'PUT', `${base}/stores/${slug}`, { name: `Store ${slug}`, locale: 'de-DE', currency: 'EUR' });
  }
  const cursors = new Map<Slug, { since: string; id: number }>();

  async function drain(slug: Slug): Promise<Recorded[]> {
    const read: Recorded[] = [];
    for (;;) {
      const cursor = cursors.get(slug);
      const query = cursor ? `&since=${encodeURIComponent(cursor.since)}&since_id=${cursor.id}` : '';
      const response = await service.api(`/v1/changes?store=${slug}${query}`, merchant.key);
      expect(response.status, response.text).toBe(200);
      cursors.set(slug, { since: response.body.next_since, id: response.body.next_id });
      if (response.body.changes.length === 0) return read;
      for (const change of response.body.changes) read.push([change.product_id, change.change_type]);
    }
  }

  const product = (urls: string[]) => ({
    content: { de: { title: 'Wanderrucksack', description: null } },
    images: urls.map((url) => ({ url })),
  });

  const world: ImageWorld = {
    service,
    clock,
    images,
    merchant,
    mirror,
    mediaDir,
    fetched,
    async putProduct(ref, imageUrls) {
      return (await adminOk(service, 'PUT', `${base}/products/${ref}`, product(imageUrls))).id;
    },
    async importProducts(products) {
      const response: TestResponse = await importNdjson(
        service,
        merchant.id,
        Object.entries(products).map(([ref, urls]) => ({ op: 'upsert_product', product: { ref, ...product(urls) } })),
      );
      expect(response.status, response.text).toBe(200);
      const ids: Record<string, number> = {};
      for (const ref of Object.keys(products)) ids[ref] = (await adminOk(service, 'GET', `${base}/products/${ref}`)).id;
      return ids;
    },
    async publicImages(productId, slug = 'de') {
      const response = await service.api(`/v1/products?store=${slug}&per_page=200`, merchant.key);
      expect(response.status, response.text).toBe(200);
      const found = (response.body.data as { id: number; images: string[] }[]).find((p) => p.id === productId);
      expect(found, `product ${productId} in store ${slug}`).toBeDefined();
      return found!.images;
    },
    async imagesInEveryStore(productId) {
      return { de: await world.publicImages(productId, 'de'), pl: await world.publicImages(productId, 'pl') };
    },
    async recorded(write) {
      for (const slug of SLUGS) await drain(slug);
      await write();
      return { de: await drain('de'), pl: await drain('pl') };
    },
    async status() {
      const { origins: _origins, ...status } = await adminOk(service, 'GET', `${base}/images`);
      return status;
    },
    async origins() {
      return (await adminOk(service, 'GET', `${base}/images`)).origins;
    },
    async sourceImages(ref) {
      return (await adminOk(service, 'GET', `${base}/products/${ref}`)).images;
    },
    mediaUrl: (bytes, ext) => `${service.url}/media/${createHash('sha256').update(bytes).digest('hex')}.${ext}`,
    mediaFiles() {
      if (!fs.existsSync(mediaDir)) return [];
      return (fs.readdirSync(mediaDir, { recursive: true }) as string[])
        .filter((name) => fs.statSync(path.join(mediaDir, name)).isFile())
        .map((name) => path.basename(name))
        .sort();
    },
    otherMirror: ({ guard = new AddressGuard(['127.0.0.1']), storage, timeoutMs }) => newMirror(guard, storage, timeoutMs),
    async close() {
      for (const m of mirrors) await m.stop();
      await images.close();
      await service.close();
    },
  };
  return world;
}

/** Both stores show the same images. */
export const everyStore = (images: string[]): Record<Slug, string[]> => ({ de: images, pl: images });

/** One `content` change of each product in each store, and nothing else. */
export function contentOf(...productIds: number[]): Record<Slug, Recorded[]> {
  const changes = [...productIds].sort((a, b) => a - b).map((id): Recorded => [id, 'content']);
  return { de: changes, pl: changes };
}

/** A store's changes in product order (the products of one write may be recorded in any order). */
export function byProduct(recorded: Record<Slug, Recorded[]>): Record<Slug, Recorded[]> {
  const sorted = (changes: Recorded[]) => [...changes].sort((a, b) => a[0] - b[0]);
  return { de: sorted(recorded.de), pl: sorted(recorded.pl) };
}

export const NOTHING: Record<Slug, Recorded[]> = { de: [], pl: [] };

/**
 * A started mirror of its own on the world's storage (`otherConnection`: on PostgreSQL another
 * process's, opened anew), with `images` over the world's settings, counting its claims with the
 * time of each; stopped (and its storage closed) by `cleanups`.
 */
export async function countingMirror(
  w: ImageWorld,
  images: Partial<Config['images']>,
  otherConnection: boolean,
  cleanups: (() => Promise<void>)[],
): Promise<{ claims: number[]; storage: CatalogStorage }> {
  const claims: number[] = [];
  const counted = timingCalls(await listeningStorage(w.service, otherConnection, cleanups), 'claimDueImageMirrors', claims);
  const config = { ...w.service.config.images, ...images };
  const mirror = new ImageMirror(
    counted,
    new LocalFolderMediaStore(w.mediaDir),
    new HttpImageFetcher(new AddressGuard(['127.0.0.1']), config),
    config,
    w.service.url,
    w.clock.now,
    new CatalogPublisher(w.clock.now, 2000),
  );
  mirror.start();
  cleanups.push(() => mirror.stop());
  return { claims, storage: counted };
}
