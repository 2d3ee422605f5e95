// A merchant's image mirroring as the admin sees it (spec 5): progress per state, the dead images,
// its origins with their state (up, or down and only probed: docs/operating.md#image-mirroring), and retrying them (admin `retryDeadImages`, CLI `images retry-dead`): they go back to pending and
// are fetched again; meanwhile their products show the supplier URL again.
import { audit, OPERATOR, type Actor } from '../admin/audit.js';
import type { CatalogWrites } from '../catalog/catalog-writes.js';
import type { CatalogPublisher } from '../catalog/publish.js';
import { scopeToMerchant } from '../storage/merchant-scope.js';
import type { CatalogStorage } from '../storage/port.js';
import type { ImageMirrorWork, ImageStateCounts } from '../catalog/model.js';
import type { components } from '../generated/admin-api.js';

/** Origins a summary lists at most (down ones first, then failing, then those with pending images). */
export const ORIGINS_LISTED_MAX = 50;
/** An origin's pending images are counted up to this (one index range each). */
export const ORIGIN_PENDING_COUNT_MAX = 10_000;

/** An origin of the merchant as its summary shows it (the admin API's ImageOrigin). */
export type ImageOriginView = components['schemas']['ImageOrigin'];

export class MerchantImages {
  constructor(private readonly writes: CatalogWrites) {}

  /** Mirroring progress per state, and the dead images with their last error (at most `limit`). */
  async mirroring(
    merchantId: number,
    limit = 100,
  ): Promise<
    ImageStateCounts & {
      dead_images: Pick<ImageMirrorWork, 'url' | 'last_error' | 'first_failure_at' | 'updated_at'>[];
      origins: ImageOriginView[];
    }
  > {
    const merchant = await this.writes.reads(merchantId);
    const [counts, dead, failing, pending] = await Promise.all([
      merchant.imageStateCounts(),
      merchant.deadImages(limit),
      merchant.imageOrigins(),
      merchant.pendingImageOrigins(ORIGINS_LISTED_MAX),
    ]);
    // Failing origins first (down ones first, as imageOrigins orders them), then the others with pending images.
    const known = new Set(failing.map((o) => o.origin));
    const listed = [
      ...failing,
      ...pending
        .filter((origin) => !known.has(origin))
        .map((origin) => ({ origin, failures: 0, down_since: null, next_probe_at: null, last_error: null })),
    ].slice(0, ORIGINS_LISTED_MAX);
    const origins: ImageOriginView[] = [];
    for (const o of listed) {
      origins.push({
        origin: o.origin,
        state: o.down_since === null ? 'up' : 'down',
        failures: o.failures,
        down_since: o.down_since,
        next_probe_at: o.down_since === null ? null : o.next_probe_at,
        last_error: o.last_error,
        pending: await merchant.countPendingImagesOf(o.origin, ORIGIN_PENDING_COUNT_MAX),
      });
    }
    return {
      ...counts,
      dead_images: dead.map(({ url, last_error, first_failure_at, updated_at }) => ({ url, last_error, first_failure_at, updated_at })),
      origins,
    };
  }

  /** Fetches the merchant's dead images again; returns how many. Audited once it is done. */
  async retryDead(merchantId: number, actor: Actor = OPERATOR): Promise<number> {
    const { storage, publisher, now } = this.writes;
    await this.writes.merchant(merchantId);
    const retried = await retryDeadImages(storage, publisher, merchantId, now());
    await audit(storage, merchantId, actor, 'image.retry_dead', `${retried} dead images retried`, now());
    return retried;
  }
}

/** Puts the merchant's dead images back to pending and re-publishes their products, in one transaction; returns how many. */
export function retryDeadImages(storage: CatalogStorage, publisher: CatalogPublisher, merchantId: number, now: Date): Promise<number> {
  return storage.transaction(async (tx) => {
    const merchant = scopeToMerchant(tx, merchantId);
    const dead = await merchant.deadImages(Number.MAX_SAFE_INTEGER);
    const at = now.toISOString();
    const productIds = new Set<number>();
    for (const image of dead) {
      await merchant.updateImageMirror(image.url, {
        state: 'pending',
        attempts: 0,
        first_failure_at: null,
        next_attempt_at: at,
        last_error: null,
        updated_at: at,
      });
      for (const id of await merchant.productIdsWithImage(image.url)) productIds.add(id);
    }
    await publisher.publishProducts(tx, merchant, [...productIds]);
    return dead.length;
  });
}
