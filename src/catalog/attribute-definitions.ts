// A merchant's attribute definitions (spec 2.1: which attributes a product shows, and how). Every
// change re-publishes the merchant's catalog.
import { OPERATOR, type Actor } from '../admin/audit.js';
import { notFound, type CatalogWrites } from './catalog-writes.js';
import type { AttributeDefinitionRecord } from './model.js';

export class AttributeDefinitions {
  constructor(private readonly writes: CatalogWrites) {}

  async list(merchantId: number): Promise<AttributeDefinitionRecord[]> {
    return (await this.writes.reads(merchantId)).listAttributeDefinitions();
  }

  upsert(merchantId: number, definition: AttributeDefinitionRecord, actor: Actor = OPERATOR): Promise<AttributeDefinitionRecord> {
    return this.writes.writeAndRepublish(merchantId, actor, async ({ tx, audit }) => {
      const existed = (await tx.listAttributeDefinitions()).some((d) => d.key === definition.key);
      const written = await tx.upsertAttributeDefinition(definition);
      await audit(existed ? 'attribute.update' : 'attribute.create', `attribute "${definition.key}"`);
      return written;
    });
  }

  delete(merchantId: number, key: string, actor: Actor = OPERATOR): Promise<void> {
    return this.writes.writeAndRepublish(merchantId, actor, async ({ tx, audit }) => {
      if (!(await tx.deleteAttributeDefinition(key))) throw notFound(`Attribute definition "${key}"`);
      await audit('attribute.delete', `attribute "${key}"`);
    });
  }
}
