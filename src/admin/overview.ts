// The merchant overview of the administration panel (docs/panel.md#pages, "Overview"): one read that gathers
// what the catalog, image and webhook services already answer — stores with their published and
// excluded products, image mirroring, endpoints by health, feed lag and the owners' latest
// notifications — so the page renders one result and asks storage nothing itself.
import type { CatalogAdmin } from './catalog-admin.js';
import type { WebhookEndpoints } from '../webhooks/endpoints.js';
import type { EndpointHealthState } from '../webhooks/health.js';
import type { ImageStateCounts, PublishedExclusionCounts, StoreRecord } from '../catalog/model.js';
import type { MerchantRecord } from '../tenancy/model.js';
import type { NotificationRecord } from '../webhooks/model.js';

export const RECENT_NOTIFICATIONS = 5;

export interface MerchantOverviewView {
  merchant: MerchantRecord;
  stores: (PublishedExclusionCounts & { store: StoreRecord })[];
  images: ImageStateCounts;
  /** By what their deliveries do now (an active endpoint whose last attempts failed is failing). */
  endpoints: { total: number; byHealth: Record<EndpointHealthState, number> };
  /** Seconds since the oldest change not yet attempted for an active endpoint was recorded; null when none waits. */
  feedLagSeconds: number | null;
  notifications: NotificationRecord[];
}

export class MerchantOverview {
  constructor(
    private readonly admin: CatalogAdmin,
    private readonly endpoints: WebhookEndpoints,
    private readonly now: () => Date,
  ) {}

  async overview(merchantId: number): Promise<MerchantOverviewView> {
    const merchant = await this.admin.merchant(merchantId);
    const [stores, images, endpoints, oldestWaiting, notifications] = await Promise.all([
      this.admin.publishedCounts(merchantId),
      this.admin.imageMirroring(merchantId, 0),
      this.endpoints.list(merchantId),
      this.endpoints.oldestWaitingChange(merchantId),
      this.endpoints.notifications(merchantId, RECENT_NOTIFICATIONS),
    ]);
    const byHealth: Record<EndpointHealthState, number> = { healthy: 0, failing: 0, paused: 0, disabled: 0 };
    for (const endpoint of endpoints) byHealth[endpoint.health] += 1;
    return {
      merchant,
      stores,
      images: { pending: images.pending, mirrored: images.mirrored, dead: images.dead },
      endpoints: { total: endpoints.length, byHealth },
      feedLagSeconds: oldestWaiting === null ? null : Math.max(0, Math.round((this.now().getTime() - Date.parse(oldestWaiting)) / 1000)),
      notifications,
    };
  }
}
