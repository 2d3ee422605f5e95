// The NDJSON import (admin `importProducts`) applies a checked file chunk by chunk; each chunk checks
// its lines' references again in its own transaction, so a supplier deleted while the file was
// being read stops the import at that chunk instead of storing offers that name nobody.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseImport } from '../../src/admin/import.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchantId: number;

beforeAll(async () => {
  service = await startTestService();
  merchantId = (await service.admin.createMerchant({ name: 'Import Outfitters' })).id;
  await service.admin.upsertStore(merchantId, 'de', { name: 'DE', locale: 'de-DE', currency: 'EUR', is_default: true, active: true, exclude_out_of_stock: false });
  await service.admin.upsertSupplier(merchantId, 'alpine', 'Alpine');
  await service.admin.upsertSupplier(merchantId, 'baltic', 'Baltic');
});
afterAll(() => service.close());

const line = (ref: string, supplier: string) => JSON.stringify({
  op: 'upsert_product', product: { ref, offers: [{ supplier_ref: supplier, quantity: 1, cost: '10.00', currency: 'EUR' }] },
});

describe('a supplier deleted while an import is read', () => {
  it('answers 409 at the chunk that names it, names its line, and applies nothing of that chunk', async () => {
    const operations = await parseImport(service.admin, merchantId, [line('A-1', 'baltic'), line('A-2', 'alpine')].join('\n'));
    // Checked and valid; then the supplier goes (no product names it yet, so the delete is allowed).
    await service.admin.deleteSupplier(merchantId, 'alpine');
    await expect(service.admin.applyProductBatch(merchantId, operations)).rejects.toMatchObject({
      code: 'conflict', detail: expect.stringContaining('line 2'),
    });
    await expect(service.admin.product(merchantId, 'A-1')).rejects.toMatchObject({ code: 'not_found' });
    await expect(service.admin.product(merchantId, 'A-2')).rejects.toMatchObject({ code: 'not_found' });
  });
});
