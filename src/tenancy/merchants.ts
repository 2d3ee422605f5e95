// Merchants (spec 1: the tenant every other record belongs to). A new merchant starts with the
// catch-all pricing rule; changing one re-publishes its catalog (the SKU pattern is in every payload).
import { audit, OPERATOR, type Actor } from '../admin/audit.js';
import type { CatalogWrites } from '../catalog/catalog-writes.js';
import { CATCH_ALL_RULE } from '../catalog/pricing-rules.js';
import { scopeToMerchant } from '../storage/merchant-scope.js';
import type { MerchantRecord } from './model.js';

export class Merchants {
  constructor(private readonly writes: CatalogWrites) {}

  /** Every merchant: the operator's list, across tenants. */
  listAcrossTenants(): Promise<MerchantRecord[]> {
    return this.writes.storage.listMerchants();
  }

  get(merchantId: number): Promise<MerchantRecord> {
    return this.writes.merchant(merchantId);
  }

  create(input: { name: string; sku_pattern?: string | null; owner_emails?: string[] }, actor: Actor = OPERATOR): Promise<MerchantRecord> {
    const { storage, now } = this.writes;
    return storage.transaction(async (tx) => {
      const merchant = await tx.createMerchant({
        name: input.name,
        sku_pattern: input.sku_pattern ?? null,
        owner_emails: input.owner_emails ?? [],
        created_at: now().toISOString(),
      });
      await scopeToMerchant(tx, merchant.id).createPricingRule(CATCH_ALL_RULE, true);
      await audit(tx, merchant.id, actor, 'merchant.create', `merchant ${merchant.id} "${merchant.name}"`, now());
      return merchant;
    });
  }

  update(
    merchantId: number,
    patch: Partial<Pick<MerchantRecord, 'name' | 'sku_pattern' | 'owner_emails'>>,
    actor: Actor = OPERATOR,
  ): Promise<MerchantRecord> {
    return this.writes.writeAndRepublish(merchantId, actor, async ({ tx, audit: record }) => {
      const merchant = (await tx.updateMerchant(patch))!;
      const changed = Object.entries(patch)
        .filter(([, value]) => value !== undefined)
        .map(([field, value]) => `${field} ${Array.isArray(value) ? value.join(', ') || 'none' : JSON.stringify(value)}`);
      await record('merchant.update', `merchant ${merchantId}: ${changed.join('; ') || 'unchanged'}`);
      return merchant;
    });
  }
}
