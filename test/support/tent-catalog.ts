// A merchant with a default store `de`, customer group `retail`, supplier `alpine` and `products`
// tents imported as NDJSON, each with `description` (long ones make a store's export large): what
// the export, cap and hashing tests read.
import { importNdjson } from '../../src/admin/import.js';
import type { TestService } from './service.js';

export async function merchantWithTents(service: TestService, name: string, products: number, description: string): Promise<number> {
  const admin = service.admin;
  const id = (await admin.createMerchant({ name })).id;
  await admin.upsertStore(id, 'de', {
    name: 'DE',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.createCustomerGroup(id, 'retail');
  await admin.upsertSupplier(id, 'alpine', 'Alpine AG');
  const lines = Array.from({ length: products }, (_, i) =>
    JSON.stringify({
      op: 'upsert_product',
      product: {
        ref: `P${i}`,
        content: { de: { title: `Zelt ${i}`, description } },
        offers: [{ supplier_ref: 'alpine', quantity: 2, cost: '10.00', currency: 'EUR' }],
      },
    }),
  );
  if (products > 0) await importNdjson(admin, id, `${lines.join('\n')}\n`);
  return id;
}
