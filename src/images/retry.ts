// Retrying dead images (admin `retryDeadImages`, CLI `images retry-dead`): they go back to pending
// and are fetched again; meanwhile their products show the supplier URL again.
import type { CatalogPublisher } from '../catalog/publish.js';
import type { CatalogStorage } from '../storage/port.js';

/** Returns how many dead images were put back to pending. */
export function retryDeadImages(storage: CatalogStorage, publisher: CatalogPublisher, merchantId: number, now: Date): Promise<number> {
  return storage.transaction(async (tx) => {
    const dead = await tx.deadImages(merchantId, Number.MAX_SAFE_INTEGER);
    const at = now.toISOString();
    const productIds = new Set<number>();
    for (const image of dead) {
      await tx.updateImageMirror(merchantId, image.url, {
        state: 'pending', attempts: 0, first_failure_at: null, next_attempt_at: at, last_error: null, updated_at: at,
      });
      for (const id of await tx.productIdsWithImage(merchantId, image.url)) productIds.add(id);
    }
    await publisher.publishProducts(tx, merchantId, [...productIds]);
    return dead.length;
  });
}
