// A merchant's suppliers (spec 2.1: offers come from suppliers). A supplier with offers stays until
// they are removed; writing one re-publishes nothing (its offers name it by ref).
import { OPERATOR, type Actor } from '../admin/audit.js';
import { ProblemError } from '../shared/problem.js';
import { notFound, type CatalogWrites } from './catalog-writes.js';
import type { SupplierRecord } from './model.js';

export class Suppliers {
  constructor(private readonly writes: CatalogWrites) {}

  async list(merchantId: number): Promise<SupplierRecord[]> {
    return (await this.writes.reads(merchantId)).listSuppliers();
  }

  upsert(merchantId: number, ref: string, name: string, actor: Actor = OPERATOR): Promise<SupplierRecord> {
    return this.writes.write(merchantId, actor, async ({ tx, audit }) => {
      const existed = (await tx.listSuppliers()).some((s) => s.ref === ref);
      const supplier = await tx.upsertSupplier(ref, name);
      await audit(existed ? 'supplier.update' : 'supplier.create', `supplier "${ref}" (${name})`);
      return supplier;
    });
  }

  delete(merchantId: number, ref: string, actor: Actor = OPERATOR): Promise<void> {
    return this.writes.write(merchantId, actor, async ({ tx, audit }) => {
      if (await tx.isSupplierReferenced(ref)) {
        throw new ProblemError('conflict', `Supplier "${ref}" still has offers; remove them from the products first.`);
      }
      if (!(await tx.deleteSupplier(ref))) throw notFound(`Supplier "${ref}"`);
      await audit('supplier.delete', `supplier "${ref}"`);
    });
  }
}
