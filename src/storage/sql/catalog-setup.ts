// Customer groups, exchange rates, pricing rules, suppliers and attribute definitions, written once
// for both engines (dialect.ts); with the merchant and its stores, the catalog setup a publish reads in one statement.
import type { CatalogSetupRead, CatalogSetupStore } from '../port.js';
import type {
  AttributeDefinitionRecord,
  CustomerGroupRecord,
  ExchangeRateRecord,
  PricingRuleInputRecord,
  PricingRuleRecord,
  SupplierRecord,
} from '../../catalog/model.js';
import { toMerchant, toPricingRule, toStore } from '../rows.js';
import type { Dialect, Row, SqlConnection } from './dialect.js';
import { STORE_COLUMNS } from './tenancy.js';

/** The rows' columns as one JSON array of objects (text), in `orderBy`'s order; an engine's own spelling (PostgreSQL: NULL for no rows). */
function jsonRows(dialect: Dialect, columns: readonly string[], orderBy: string): string {
  const pairs = columns.map((column) => `'${column}', ${column}`).join(', ');
  return dialect.engine === 'sqlite'
    ? `json_group_array(json_object(${pairs}) ORDER BY ${orderBy})`
    : `json_agg(json_build_object(${pairs}) ORDER BY ${orderBy})::text`;
}

const PRICING_RULE_COLUMNS = [
  'id',
  'priority',
  'customer_group_id',
  'store_id',
  'manufacturer',
  'min_cost',
  'max_cost',
  'markup_percent',
  'markup_amount',
  'price_ending',
  'is_catch_all',
];

/** A list of catalogSetup's row (JSON text; null: none). */
const listOf = (value: unknown): Row[] => (value === null || value === undefined ? [] : (JSON.parse(value as string) as Row[]));

export class SqlCatalogSetup implements CatalogSetupStore {
  static readonly writes = [
    'createCustomerGroup',
    'updateCustomerGroup',
    'deleteCustomerGroup',
    'upsertExchangeRate',
    'deleteExchangeRate',
    'createPricingRule',
    'updatePricingRule',
    'deletePricingRule',
    'upsertSupplier',
    'deleteSupplier',
    'upsertAttributeDefinition',
    'deleteAttributeDefinition',
  ] as const;

  constructor(private readonly c: SqlConnection) {}

  async catalogSetup(merchantId: number): Promise<CatalogSetupRead | undefined> {
    // Each list in the order its own list method reads it.
    const d = this.c.dialect;
    const row = await this.c.one(
      `SELECT m.*,
        (SELECT ${jsonRows(d, STORE_COLUMNS, 'is_default DESC, id')} FROM stores WHERE merchant_id = m.id) AS stores,
        (SELECT ${jsonRows(d, ['id', 'name'], 'id')} FROM customer_groups WHERE merchant_id = m.id) AS customer_groups,
        (SELECT ${jsonRows(d, PRICING_RULE_COLUMNS, 'priority, id')} FROM pricing_rules WHERE merchant_id = m.id) AS pricing_rules,
        (SELECT ${jsonRows(d, ['base', 'quote', 'rate'], 'base, quote')} FROM exchange_rates WHERE merchant_id = m.id) AS exchange_rates,
        (SELECT ${jsonRows(d, ['key', 'unit', 'labels'], 'key')} FROM attribute_definitions WHERE merchant_id = m.id) AS attribute_definitions,
        (SELECT ${jsonRows(d, ['id', 'ref', 'name'], 'id')} FROM suppliers WHERE merchant_id = m.id) AS suppliers
      FROM merchants AS m WHERE m.id = $1`,
      [merchantId],
    );
    if (!row) return undefined;
    return {
      merchant: toMerchant(row),
      stores: listOf(row.stores).map(toStore),
      customerGroups: listOf(row.customer_groups) as unknown as CustomerGroupRecord[],
      pricingRules: listOf(row.pricing_rules).map(toPricingRule),
      exchangeRates: listOf(row.exchange_rates) as unknown as ExchangeRateRecord[],
      attributeDefinitions: listOf(row.attribute_definitions).map(toAttributeDefinition),
      suppliers: listOf(row.suppliers) as unknown as SupplierRecord[],
    };
  }

  async listCustomerGroups(merchantId: number): Promise<CustomerGroupRecord[]> {
    return this.c.rows<CustomerGroupRecord & Row>('SELECT id, name FROM customer_groups WHERE merchant_id = $1 ORDER BY id', [merchantId]);
  }

  async createCustomerGroup(merchantId: number, name: string): Promise<CustomerGroupRecord> {
    return (await this.c.one<CustomerGroupRecord & Row>(
      'INSERT INTO customer_groups (merchant_id, name) VALUES ($1, $2) RETURNING id, name',
      [merchantId, name],
    ))!;
  }

  async updateCustomerGroup(merchantId: number, id: number, name: string): Promise<CustomerGroupRecord | undefined> {
    return this.c.one<CustomerGroupRecord & Row>(
      'UPDATE customer_groups SET name = $1 WHERE merchant_id = $2 AND id = $3 RETURNING id, name',
      [name, merchantId, id],
    );
  }

  async deleteCustomerGroup(merchantId: number, id: number): Promise<boolean> {
    return (await this.c.run('DELETE FROM customer_groups WHERE merchant_id = $1 AND id = $2', [merchantId, id])) > 0;
  }

  // Exchange rates

  async listExchangeRates(merchantId: number): Promise<ExchangeRateRecord[]> {
    return this.c.rows<ExchangeRateRecord & Row>(
      'SELECT base, quote, rate FROM exchange_rates WHERE merchant_id = $1 ORDER BY base, quote',
      [merchantId],
    );
  }

  async upsertExchangeRate(merchantId: number, rate: ExchangeRateRecord): Promise<ExchangeRateRecord> {
    await this.c.run(
      `INSERT INTO exchange_rates (merchant_id, base, quote, rate) VALUES ($1, $2, $3, $4)
      ON CONFLICT (merchant_id, base, quote) DO UPDATE SET rate = excluded.rate`,
      [merchantId, rate.base, rate.quote, rate.rate],
    );
    return rate;
  }

  async deleteExchangeRate(merchantId: number, base: string, quote: string): Promise<boolean> {
    return (
      (await this.c.run('DELETE FROM exchange_rates WHERE merchant_id = $1 AND base = $2 AND quote = $3', [merchantId, base, quote])) > 0
    );
  }

  // Pricing rules

  async listPricingRules(merchantId: number): Promise<PricingRuleRecord[]> {
    return (await this.c.rows('SELECT * FROM pricing_rules WHERE merchant_id = $1 ORDER BY priority, id', [merchantId])).map(toPricingRule);
  }

  async getPricingRule(merchantId: number, id: number): Promise<PricingRuleRecord | undefined> {
    const row = await this.c.one('SELECT * FROM pricing_rules WHERE merchant_id = $1 AND id = $2', [merchantId, id]);
    return row && toPricingRule(row);
  }

  async createPricingRule(merchantId: number, input: PricingRuleInputRecord, isCatchAll = false): Promise<PricingRuleRecord> {
    const row = await this.c.one(
      `INSERT INTO pricing_rules (merchant_id, priority, customer_group_id, store_id, manufacturer,
        min_cost, max_cost, markup_percent, markup_amount, price_ending, is_catch_all)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING *`,
      [
        merchantId,
        input.priority,
        input.customer_group_id,
        input.store_id,
        input.manufacturer,
        input.min_cost,
        input.max_cost,
        input.markup_percent,
        input.markup_amount,
        input.price_ending,
        this.c.dialect.bool(isCatchAll),
      ],
    );
    return toPricingRule(row!);
  }

  async updatePricingRule(merchantId: number, id: number, input: PricingRuleInputRecord): Promise<PricingRuleRecord | undefined> {
    const row = await this.c.one(
      `UPDATE pricing_rules SET priority = $1, customer_group_id = $2, store_id = $3, manufacturer = $4,
        min_cost = $5, max_cost = $6, markup_percent = $7, markup_amount = $8, price_ending = $9
      WHERE merchant_id = $10 AND id = $11 RETURNING *`,
      [
        input.priority,
        input.customer_group_id,
        input.store_id,
        input.manufacturer,
        input.min_cost,
        input.max_cost,
        input.markup_percent,
        input.markup_amount,
        input.price_ending,
        merchantId,
        id,
      ],
    );
    return row && toPricingRule(row);
  }

  async deletePricingRule(merchantId: number, id: number): Promise<boolean> {
    return (await this.c.run('DELETE FROM pricing_rules WHERE merchant_id = $1 AND id = $2 AND NOT is_catch_all', [merchantId, id])) > 0;
  }

  // Suppliers

  async listSuppliers(merchantId: number): Promise<SupplierRecord[]> {
    return this.c.rows<SupplierRecord & Row>('SELECT id, ref, name FROM suppliers WHERE merchant_id = $1 ORDER BY id', [merchantId]);
  }

  async upsertSupplier(merchantId: number, ref: string, name: string): Promise<SupplierRecord> {
    // Update, else insert: PostgreSQL's INSERT ... ON CONFLICT would draw an identity value on every update too.
    const updated = await this.c.one<SupplierRecord & Row>(
      'UPDATE suppliers SET name = $3 WHERE merchant_id = $1 AND ref = $2 RETURNING id, ref, name',
      [merchantId, ref, name],
    );
    return (
      updated ??
      (await this.c.one<SupplierRecord & Row>(
        'INSERT INTO suppliers (merchant_id, ref, name) VALUES ($1, $2, $3) RETURNING id, ref, name',
        [merchantId, ref, name],
      ))!
    );
  }

  async deleteSupplier(merchantId: number, ref: string): Promise<boolean> {
    return (await this.c.run('DELETE FROM suppliers WHERE merchant_id = $1 AND ref = $2', [merchantId, ref])) > 0;
  }

  async isSupplierReferenced(merchantId: number, ref: string): Promise<boolean> {
    // An offer or a supplier attribute of a product names it (product_links, kept with the sources).
    return (
      (await this.c.one(`SELECT 1 FROM product_links WHERE merchant_id = $1 AND kind = 'supplier' AND value = $2 LIMIT 1`, [
        merchantId,
        ref,
      ])) !== undefined
    );
  }

  async currenciesInUse(merchantId: number, currencies: string[]): Promise<string[]> {
    if (currencies.length === 0) return [];
    const d = this.c.dialect;
    return (
      await this.c.rows<{ value: string }>(
        `SELECT c.value FROM ${d.listRows('$2', 'text', 'c')} WHERE EXISTS (
      SELECT 1 FROM product_links AS l WHERE l.merchant_id = $1 AND l.kind = 'currency' AND l.value = c.value)`,
        [merchantId, d.list(currencies)],
      )
    ).map((r) => r.value);
  }

  // Attribute definitions

  async listAttributeDefinitions(merchantId: number): Promise<AttributeDefinitionRecord[]> {
    return (await this.c.rows('SELECT key, unit, labels FROM attribute_definitions WHERE merchant_id = $1 ORDER BY key', [merchantId])).map(
      toAttributeDefinition,
    );
  }

  async upsertAttributeDefinition(merchantId: number, definition: AttributeDefinitionRecord): Promise<AttributeDefinitionRecord> {
    await this.c.run(
      `INSERT INTO attribute_definitions (merchant_id, key, unit, labels) VALUES ($1, $2, $3, $4)
      ON CONFLICT (merchant_id, key) DO UPDATE SET unit = excluded.unit, labels = excluded.labels`,
      [merchantId, definition.key, definition.unit, JSON.stringify(definition.labels)],
    );
    return definition;
  }

  async deleteAttributeDefinition(merchantId: number, key: string): Promise<boolean> {
    return (await this.c.run('DELETE FROM attribute_definitions WHERE merchant_id = $1 AND key = $2', [merchantId, key])) > 0;
  }
}

function toAttributeDefinition(r: Row): AttributeDefinitionRecord {
  return {
    key: r.key as string,
    unit: (r.unit as string | null) ?? null,
    labels: JSON.parse(r.labels as string) as AttributeDefinitionRecord['labels'],
  };
}
