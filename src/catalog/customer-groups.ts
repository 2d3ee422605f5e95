// A merchant's customer groups (spec 2.3: a price per customer group). Every change re-publishes the
// merchant's catalog: a group adds or removes a price of every product.
import { OPERATOR, type Actor } from '../admin/audit.js';
import { ProblemError } from '../shared/problem.js';
import { notFound, type CatalogWrites } from './catalog-writes.js';
import type { CustomerGroupRecord } from './model.js';

export class CustomerGroups {
  constructor(private readonly writes: CatalogWrites) {}

  async list(merchantId: number): Promise<CustomerGroupRecord[]> {
    return (await this.writes.reads(merchantId)).listCustomerGroups();
  }

  create(merchantId: number, name: string, actor: Actor = OPERATOR): Promise<CustomerGroupRecord> {
    return this.writes.writeAndRepublish(merchantId, actor, async ({ tx, audit }) => {
      if ((await tx.listCustomerGroups()).some((g) => g.name === name)) {
        throw new ProblemError('conflict', `A customer group named "${name}" already exists.`);
      }
      const group = await tx.createCustomerGroup(name);
      await audit('customer_group.create', `customer group ${group.id} "${name}"`);
      return group;
    });
  }

  update(merchantId: number, id: number, name: string, actor: Actor = OPERATOR): Promise<CustomerGroupRecord> {
    return this.writes.writeAndRepublish(merchantId, actor, async ({ tx, audit }) => {
      if ((await tx.listCustomerGroups()).some((g) => g.name === name && g.id !== id)) {
        throw new ProblemError('conflict', `A customer group named "${name}" already exists.`);
      }
      const group = await tx.updateCustomerGroup(id, name);
      if (!group) throw notFound(`Customer group ${id}`);
      await audit('customer_group.update', `customer group ${id} "${name}"`);
      return group;
    });
  }

  delete(merchantId: number, id: number, actor: Actor = OPERATOR): Promise<void> {
    return this.writes.writeAndRepublish(merchantId, actor, async ({ tx, audit }) => {
      if ((await tx.listPricingRules()).some((r) => r.customer_group_id === id)) {
        throw new ProblemError('conflict', `Pricing rules still refer to customer group ${id}; change or delete them first.`);
      }
      if (!(await tx.deleteCustomerGroup(id))) throw notFound(`Customer group ${id}`);
      await audit('customer_group.delete', `customer group ${id}`);
    });
  }
}
