// Customer groups, exchange rates, pricing rules, suppliers and attribute definitions on SQLite.
import type { CatalogSetupStore } from '../port.js';
import type {
  AttributeDefinitionRecord, CustomerGroupRecord, ExchangeRateRecord, PricingRuleInputRecord, PricingRuleRecord, SupplierRecord,
} from '../records.js';
import { toPricingRule } from '../rows.js';
import type { Row, SqliteConnection } from './connection.js';

export class SqliteCatalogSetup implements CatalogSetupStore {
  static readonly writes = [
    'createCustomerGroup', 'updateCustomerGroup', 'deleteCustomerGroup', 'upsertExchangeRate', 'deleteExchangeRate',
    'createPricingRule', 'updatePricingRule', 'deletePricingRule', 'upsertSupplier', 'deleteSupplier',
    'upsertAttributeDefinition', 'deleteAttributeDefinition',
  ] as const;

  constructor(private readonly c: SqliteConnection) {}

  private rule(merchantId: number, id: number): PricingRuleRecord | undefined {
    const row = this.c.stmt('SELECT * FROM pricing_rules WHERE merchant_id = ? AND id = ?').get(merchantId, id) as Row | undefined;
    return row && toPricingRule(row);
  }


  async listCustomerGroups(merchantId: number): Promise<CustomerGroupRecord[]> {
    return this.c.stmt('SELECT id, name FROM customer_groups WHERE merchant_id = ? ORDER BY id').all(merchantId) as CustomerGroupRecord[];
  }

  async createCustomerGroup(merchantId: number, name: string): Promise<CustomerGroupRecord> {
    const info = this.c.stmt('INSERT INTO customer_groups (merchant_id, name) VALUES (?, ?)').run(merchantId, name);
    return { id: Number(info.lastInsertRowid), name };
  }

  async updateCustomerGroup(merchantId: number, id: number, name: string): Promise<CustomerGroupRecord | undefined> {
    const info = this.c.stmt('UPDATE customer_groups SET name = ? WHERE merchant_id = ? AND id = ?').run(name, merchantId, id);
    return info.changes > 0 ? { id, name } : undefined;
  }

  async deleteCustomerGroup(merchantId: number, id: number): Promise<boolean> {
    return this.c.stmt('DELETE FROM customer_groups WHERE merchant_id = ? AND id = ?').run(merchantId, id).changes > 0;
  }

  // Exchange rates

  async listExchangeRates(merchantId: number): Promise<ExchangeRateRecord[]> {
    return this.c.stmt('SELECT base, quote, rate FROM exchange_rates WHERE merchant_id = ? ORDER BY base, quote').all(merchantId) as ExchangeRateRecord[];
  }

  async upsertExchangeRate(merchantId: number, rate: ExchangeRateRecord): Promise<ExchangeRateRecord> {
    this.c.stmt(`INSERT INTO exchange_rates (merchant_id, base, quote, rate) VALUES (?, ?, ?, ?)
      ON CONFLICT (merchant_id, base, quote) DO UPDATE SET rate = excluded.rate`)
      .run(merchantId, rate.base, rate.quote, rate.rate);
    return rate;
  }

  async deleteExchangeRate(merchantId: number, base: string, quote: string): Promise<boolean> {
    return this.c.stmt('DELETE FROM exchange_rates WHERE merchant_id = ? AND base = ? AND quote = ?').run(merchantId, base, quote).changes > 0;
  }

  // Pricing rules

  async listPricingRules(merchantId: number): Promise<PricingRuleRecord[]> {
    return (this.c.stmt('SELECT * FROM pricing_rules WHERE merchant_id = ? ORDER BY priority, id').all(merchantId) as Row[]).map(toPricingRule);
  }

  async getPricingRule(merchantId: number, id: number): Promise<PricingRuleRecord | undefined> {
    return this.rule(merchantId, id);
  }

  async createPricingRule(merchantId: number, input: PricingRuleInputRecord, isCatchAll = false): Promise<PricingRuleRecord> {
    const info = this.c.stmt(`INSERT INTO pricing_rules (merchant_id, priority, customer_group_id, store_id, manufacturer,
        min_cost, max_cost, markup_percent, markup_amount, price_ending, is_catch_all)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(merchantId, input.priority, input.customer_group_id, input.store_id, input.manufacturer, input.min_cost,
        input.max_cost, input.markup_percent, input.markup_amount, input.price_ending, isCatchAll ? 1 : 0);
    return this.rule(merchantId, Number(info.lastInsertRowid))!;
  }

  async updatePricingRule(merchantId: number, id: number, input: PricingRuleInputRecord): Promise<PricingRuleRecord | undefined> {
    const info = this.c.stmt(`UPDATE pricing_rules SET priority = ?, customer_group_id = ?, store_id = ?, manufacturer = ?,
        min_cost = ?, max_cost = ?, markup_percent = ?, markup_amount = ?, price_ending = ?
      WHERE merchant_id = ? AND id = ?`)
      .run(input.priority, input.customer_group_id, input.store_id, input.manufacturer, input.min_cost, input.max_cost,
        input.markup_percent, input.markup_amount, input.price_ending, merchantId, id);
    return info.changes > 0 ? this.rule(merchantId, id) : undefined;
  }

  async deletePricingRule(merchantId: number, id: number): Promise<boolean> {
    return this.c.stmt('DELETE FROM pricing_rules WHERE merchant_id = ? AND id = ? AND is_catch_all = 0').run(merchantId, id).changes > 0;
  }

  // Suppliers

  async listSuppliers(merchantId: number): Promise<SupplierRecord[]> {
    return this.c.stmt('SELECT id, ref, name FROM suppliers WHERE merchant_id = ? ORDER BY id').all(merchantId) as SupplierRecord[];
  }

  async upsertSupplier(merchantId: number, ref: string, name: string): Promise<SupplierRecord> {
    this.c.stmt(`INSERT INTO suppliers (merchant_id, ref, name) VALUES (?, ?, ?)
      ON CONFLICT (merchant_id, ref) DO UPDATE SET name = excluded.name`).run(merchantId, ref, name);
    return this.c.stmt('SELECT id, ref, name FROM suppliers WHERE merchant_id = ? AND ref = ?').get(merchantId, ref) as SupplierRecord;
  }

  async deleteSupplier(merchantId: number, ref: string): Promise<boolean> {
    return this.c.stmt('DELETE FROM suppliers WHERE merchant_id = ? AND ref = ?').run(merchantId, ref).changes > 0;
  }

  async isSupplierReferenced(merchantId: number, ref: string): Promise<boolean> {
    // An offer or a supplier attribute of a product names it (product_links, kept with the sources).
    return this.c.stmt(`SELECT 1 FROM product_links WHERE merchant_id = ? AND kind = 'supplier' AND value = ? LIMIT 1`)
      .get(merchantId, ref) !== undefined;
  }

  async currenciesInUse(merchantId: number, currencies: string[]): Promise<string[]> {
    if (currencies.length === 0) return [];
    return this.c.stmt(`SELECT json_each.value FROM json_each(?) WHERE EXISTS (
      SELECT 1 FROM product_links AS l WHERE l.merchant_id = ? AND l.kind = 'currency' AND l.value = json_each.value)`)
      .pluck().all(JSON.stringify(currencies), merchantId) as string[];
  }

  // Attribute definitions

  async listAttributeDefinitions(merchantId: number): Promise<AttributeDefinitionRecord[]> {
    return (this.c.stmt('SELECT key, unit, labels FROM attribute_definitions WHERE merchant_id = ? ORDER BY key').all(merchantId) as Row[])
      .map((r) => ({ key: r.key as string, unit: (r.unit as string | null) ?? null, labels: JSON.parse(r.labels as string) }));
  }

  async upsertAttributeDefinition(merchantId: number, definition: AttributeDefinitionRecord): Promise<AttributeDefinitionRecord> {
    this.c.stmt(`INSERT INTO attribute_definitions (merchant_id, key, unit, labels) VALUES (?, ?, ?, ?)
      ON CONFLICT (merchant_id, key) DO UPDATE SET unit = excluded.unit, labels = excluded.labels`)
      .run(merchantId, definition.key, definition.unit, JSON.stringify(definition.labels));
    return definition;
  }

  async deleteAttributeDefinition(merchantId: number, key: string): Promise<boolean> {
    return this.c.stmt('DELETE FROM attribute_definitions WHERE merchant_id = ? AND key = ?').run(merchantId, key).changes > 0;
  }
}
