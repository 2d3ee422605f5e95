// Findings of the adversarial review (issue 13.5-13.7), end to end on either engine: what the
// admin API and the NDJSON import accept is stored and published exactly, and what they cannot
// honour is refused with 400 problem+json, nothing stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, type OutdoorCatalog } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let catalog: OutdoorCatalog;

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
});
afterAll(() => service.close());

/** The amounts of each price entry as written in the response text (JSON.parse would round them). */
function writtenPrices(text: string): { group: string; base: string; price: string }[] {
  return [...text.matchAll(/"customer_group":"([^"]+)","base_cost":([0-9.]+),"computed_price":([0-9.]+),/g)]
    .map(([, group, base, price]) => ({ group: group!, base: base!, price: price! }));
}

describe('issue 13.7: money beyond double precision is published exactly', () => {
  it('a 40-digit cost is converted, marked up and given its price ending digit for digit in every store', async () => {
    const cost = '9999999999999999999999999999999999999999';
    const created = await adminOk(service, 'PUT', `${catalog.merchant.base}/products/HUGE-1`, {
      content: { de: { title: 'Teuer' }, pl: { title: 'Drogi' } },
      offers: [{ supplier_ref: 'alpine', quantity: 1, cost, currency: 'EUR' }],
    });
    const read = async (store: string) => (await service.api(`/v1/products/${created.id}?store=${store}`, catalog.merchant.key)).text;
    // Outdoor catalog: retail +40 % ending 99, wholesale +10 %; EUR->PLN 4.25, EUR->JPY 160.
    expect(writtenPrices(await read('de'))).toEqual([
      { group: 'retail', base: '9999999999999999999999999999999999999999.00', price: '13999999999999999999999999999999999999998.99' },
      { group: 'wholesale', base: '9999999999999999999999999999999999999999.00', price: '10999999999999999999999999999999999999998.90' },
    ]);
    expect(writtenPrices(await read('pl'))).toEqual([
      { group: 'retail', base: '42499999999999999999999999999999999999995.75', price: '59499999999999999999999999999999999999994.99' },
      { group: 'wholesale', base: '42499999999999999999999999999999999999995.75', price: '46749999999999999999999999999999999999995.33' },
    ]);
    expect(writtenPrices(await read('jp'))).toEqual([
      { group: 'retail', base: '1599999999999999999999999999999999999999840', price: '2239999999999999999999999999999999999999799' },
      { group: 'wholesale', base: '1599999999999999999999999999999999999999840', price: '1759999999999999999999999999999999999999824' },
    ]);
  });
});
