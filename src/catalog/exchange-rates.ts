// A merchant's exchange rates (spec 2.2: prices converted into the store's currency). A change
// re-publishes only the stores whose currency some billed currency now converts into differently.
import { OPERATOR, type Actor } from '../admin/audit.js';
import { invalidInput } from '../shared/problem.js';
import type { MerchantScope } from '../storage/merchant-scope.js';
import { notFound, type CatalogWrites } from './catalog-writes.js';
import type { ExchangeRateRecord } from './model.js';
import { currenciesRepriced } from './money.js';

export class ExchangeRates {
  constructor(private readonly writes: CatalogWrites) {}

  async list(merchantId: number): Promise<ExchangeRateRecord[]> {
    return (await this.writes.reads(merchantId)).listExchangeRates();
  }

  upsert(merchantId: number, rate: ExchangeRateRecord, actor: Actor = OPERATOR): Promise<ExchangeRateRecord> {
    if (rate.base === rate.quote) {
      throw invalidInput('path', [{ name: 'quote', in: 'path', reason: 'must differ from base' }]);
    }
    if (!/[1-9]/.test(rate.rate)) throw invalidInput('body', [{ name: '/rate', in: 'body', reason: 'must be greater than 0' }]);
    let before: ExchangeRateRecord[] = [];
    return this.writes.writeAndRepublish(
      merchantId,
      actor,
      async ({ tx, audit }) => {
        before = await tx.listExchangeRates();
        const existed = before.some((r) => r.base === rate.base && r.quote === rate.quote);
        const written = await tx.upsertExchangeRate(rate);
        await audit(existed ? 'exchange_rate.update' : 'exchange_rate.create', `${rate.base}/${rate.quote} = ${written.rate}`);
        return written;
      },
      (tx) => storesRepriced(tx, before),
    );
  }

  delete(merchantId: number, base: string, quote: string, actor: Actor = OPERATOR): Promise<void> {
    let before: ExchangeRateRecord[] = [];
    return this.writes.writeAndRepublish(
      merchantId,
      actor,
      async ({ tx, audit }) => {
        before = await tx.listExchangeRates();
        if (!(await tx.deleteExchangeRate(base, quote))) throw notFound(`Exchange rate ${base}/${quote}`);
        await audit('exchange_rate.delete', `${base}/${quote}`);
      },
      (tx) => storesRepriced(tx, before),
    );
  }
}

/**
 * The stores into whose currency some currency the merchant's products bill in now converts
 * differently: a rate converts between its two currencies, and also between any two currencies
 * whose path passes through it (money.ts), so a store of a third currency can be re-priced too.
 */
async function storesRepriced(tx: MerchantScope, before: ExchangeRateRecord[]): Promise<number[]> {
  const [stores, after] = await Promise.all([tx.listStores(), tx.listExchangeRates()]);
  const rated = [...new Set([...before, ...after].flatMap((r) => [r.base, r.quote]))].sort();
  const billed = await tx.currenciesInUse(rated);
  const repriced = currenciesRepriced(before, after, new Set(stores.map((s) => s.currency)), billed);
  return stores.filter((s) => repriced.has(s.currency)).map((s) => s.id);
}
