// A merchant's image mirroring as the admin sees it (spec 5): progress per state, the dead images,
// and retrying them (admin `retryDeadImages`, CLI `images retry-dead`): they go back to pending and
// are fetched again; meanwhile their products show the supplier URL again.
import { audit, OPERATOR, type Actor } from '../admin/audit.js';
import type { CatalogWrites } from '../catalog/catalog-writes.js';
import type { CatalogPublisher } from '../catalog/publish.js';
import { scopeToMerchant } from '../storage/merchant-scope.js';
import type { CatalogStorage } from '../storage/port.js';
import type { ImageMirrorWork, ImageStateCounts } from '../catalog/model.js';

export class MerchantImages {
  constructor(private readonly writes: CatalogWrites) {}

  /** Mirroring progress per state, and the dead images with their last error (at most `limit`). */
  async mirroring(
    merchantId: number,
    limit = 100,
  ): Promise<
    ImageStateCounts & {
      dead_images: Pick<ImageMirrorWork, 'url' | 'last_error' | 'first_failure_at' | 'updated_at'>[];
    }
  > {
    const merchant = await this.writes.reads(merchantId);
    const [counts, dead] = await Promise.all([merchant.imageStateCounts(), merchant.deadImages(limit)]);
    return {
      ...counts,
      dead_images: dead.map(({ url, last_error, first_failure_at, updated_at }) => ({ url, last_error, first_failure_at, updated_at })),
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
