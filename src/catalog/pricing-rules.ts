// A merchant's pricing rules (spec 2.3: the first matching rule by priority prices a product for a
// customer group), with the catch-all rule every merchant has. Every change re-publishes the
// merchant's catalog.
import { OPERATOR, type Actor } from '../admin/audit.js';
import { invalidInput, ProblemError, type InvalidParam } from '../shared/problem.js';
import type { MerchantScope } from '../storage/merchant-scope.js';
import { notFound, type CatalogWrites } from './catalog-writes.js';
import type { PricingRuleInputRecord, PricingRuleRecord } from './model.js';
import { parseDecimal } from './money.js';

/** The catch-all rule every merchant has (docs/decisions.md#resolution: applied_rule_id is never null). */
export const CATCH_ALL_PRIORITY = 2147483647;

/** The catch-all rule a new merchant starts with: matches everything, runs last, adds nothing. */
export const CATCH_ALL_RULE: PricingRuleInputRecord = {
  priority: CATCH_ALL_PRIORITY,
  customer_group_id: null,
  store_id: null,
  manufacturer: null,
  min_cost: null,
  max_cost: null,
  markup_percent: '0',
  markup_amount: '0',
  price_ending: null,
};

export class PricingRules {
  constructor(private readonly writes: CatalogWrites) {}

  async list(merchantId: number): Promise<PricingRuleRecord[]> {
    return (await this.writes.reads(merchantId)).listPricingRules();
  }

  create(merchantId: number, input: PricingRuleInputRecord, actor: Actor = OPERATOR): Promise<PricingRuleRecord> {
    return this.writes.writeAndRepublish(merchantId, actor, async ({ tx, audit }) => {
      await checkRuleReferences(tx, input);
      if (input.priority >= CATCH_ALL_PRIORITY) {
        throw invalidInput('body', [
          { name: '/priority', in: 'body', reason: `must be below ${CATCH_ALL_PRIORITY} (the catch-all rule runs last)` },
        ]);
      }
      const rule = await tx.createPricingRule(input);
      await audit('pricing_rule.create', ruleDetail(rule));
      return rule;
    });
  }

  /** Replaces the rule with `change`, or with what `change` makes of the current rule (a merge patch), in one transaction. */
  update(
    merchantId: number,
    id: number,
    change: PricingRuleInputRecord | ((current: PricingRuleRecord) => PricingRuleInputRecord),
    actor: Actor = OPERATOR,
  ): Promise<PricingRuleRecord> {
    return this.writes.writeAndRepublish(merchantId, actor, async ({ tx, audit }) => {
      const current = await tx.getPricingRule(id);
      if (!current) throw notFound(`Pricing rule ${id}`);
      const input = typeof change === 'function' ? change(current) : change;
      // The catch-all keeps matching everything and running last; only its markup and ending change.
      if (current.is_catch_all) {
        const conditions = [input.customer_group_id, input.store_id, input.manufacturer, input.min_cost, input.max_cost];
        if (input.priority !== CATCH_ALL_PRIORITY || conditions.some((c) => c !== null)) {
          throw new ProblemError(
            'conflict',
            `The catch-all rule keeps priority ${CATCH_ALL_PRIORITY} and no conditions; only its markups and price ending change.`,
          );
        }
      } else if (input.priority >= CATCH_ALL_PRIORITY) {
        throw invalidInput('body', [
          { name: '/priority', in: 'body', reason: `must be below ${CATCH_ALL_PRIORITY} (the catch-all rule runs last)` },
        ]);
      }
      await checkRuleReferences(tx, input);
      const rule = (await tx.updatePricingRule(id, input))!;
      await audit('pricing_rule.update', ruleDetail(rule));
      return rule;
    });
  }

  delete(merchantId: number, id: number, actor: Actor = OPERATOR): Promise<void> {
    return this.writes.writeAndRepublish(merchantId, actor, async ({ tx, audit }) => {
      const rule = await tx.getPricingRule(id);
      if (!rule) throw notFound(`Pricing rule ${id}`);
      if (rule.is_catch_all) throw new ProblemError('conflict', 'The catch-all pricing rule cannot be deleted; edit its markup instead.');
      await tx.deletePricingRule(id);
      await audit('pricing_rule.delete', `pricing rule ${id}`);
    });
  }
}

async function checkRuleReferences(tx: MerchantScope, input: PricingRuleInputRecord): Promise<void> {
  const problems: InvalidParam[] = [];
  if (input.customer_group_id !== null && !(await tx.listCustomerGroups()).some((g) => g.id === input.customer_group_id)) {
    problems.push({ name: '/customer_group_id', in: 'body', reason: 'is not a customer group of this merchant' });
  }
  if (input.store_id !== null && !(await tx.listStores()).some((s) => s.id === input.store_id)) {
    problems.push({ name: '/store_id', in: 'body', reason: 'is not a store of this merchant' });
  }
  if (input.min_cost !== null && input.max_cost !== null && compareDecimals(input.min_cost, input.max_cost) > 0) {
    problems.push({ name: '/min_cost', in: 'body', reason: 'must not exceed max_cost' });
  }
  if (problems.length) throw invalidInput('body', problems);
}

function compareDecimals(a: string, b: string): number {
  const x = parseDecimal(a);
  const y = parseDecimal(b);
  const difference = x.n * y.d - y.n * x.d;
  return difference === 0n ? 0 : difference > 0n ? 1 : -1;
}

/** A pricing rule in the audit log: its id, priority and what it does. */
function ruleDetail(rule: PricingRuleRecord): string {
  const markup =
    [rule.markup_percent !== '0' && `+${rule.markup_percent}%`, rule.markup_amount !== '0' && `+${rule.markup_amount}`]
      .filter(Boolean)
      .join(' ') || 'no markup';
  return `pricing rule ${rule.id} (priority ${rule.priority}, ${markup}${rule.price_ending ? `, ending ${rule.price_ending}` : ''})`;
}
