// An import that still stops part-way (a chunk's supplier deleted while it runs, an
// unexpected error) says exactly which lines it applied, in its answer and in its job record.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchant: MerchantHandle;

beforeAll(async () => {
  // Ten operations per chunk: 30 operations are applied in three transactions.
  service = await startTestService({ config: { limits: { publishChunk: 10 } } });
  merchant = await createMerchant(service, 'Part-way Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
});
afterAll(() => service.close());

/** 30 operations on lines 1-31 (line 5 is blank); operations 21-30 (lines 22-31) name `supplier`. */
function file(prefix: string, supplier: string): string {
  const lines = Array.from({ length: 30 }, (_, i) =>
    JSON.stringify(simpleProduct(`${prefix}-${i + 1}`, '10.00', i >= 20 ? supplier : 'alpine')),
  );
  lines.splice(4, 0, '');
  return `${lines.join('\n')}\n`;
}

const refs = async () => (await service.storage.productsAfter(merchant.id, 0, 1000)).map((p) => p.ref);

it('a supplier deleted while the import runs: 409 saying lines 1-21 (20 operations) were applied and lines 22-31 were not', async () => {
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/baltic`, { name: 'Baltic' });
  const { imports } = service.service;
  const applyNext = imports.applyNext.bind(imports);
  let chunks = 0;
  imports.applyNext = async (tx, run) => {
    const more = await applyNext(tx, run);
    // With the second chunk, the supplier the third chunk's lines name is deleted.
    if (++chunks === 2) await tx.deleteSupplier(merchant.id, 'baltic');
    return more;
  };
  try {
    const response = await importNdjson(service, merchant.id, file('DEL', 'baltic'));
    expect(response.status, response.text).toBe(409);
    expect(response.body.detail).toMatch(
      /was deleted while the import ran\. Lines 1-21 were applied \(20 operations\); lines 22-31 were not\.$/,
    );
    const [job] = await imports.recent(merchant.id, 1);
    expect(job).toMatchObject({
      state: 'failed',
      error_code: 'conflict',
      products_applied: 20,
      operations: 30,
      lines_read: 31,
      error: response.body.detail,
    });
    const stored = await refs();
    expect(stored.filter((ref) => ref.startsWith('DEL-')).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `DEL-${i + 1}`).sort());
  } finally {
    imports.applyNext = applyNext;
  }
});

it('an unexpected error in the first chunk: 500 saying no line was applied', async () => {
  const { admin } = service;
  const applyProductBatchIn = admin.applyProductBatchIn.bind(admin);
  admin.applyProductBatchIn = async () => {
    throw new Error('the disk is full');
  };
  try {
    const response = await importNdjson(service, merchant.id, file('ERR', 'alpine'));
    expect(response.status, response.text).toBe(500);
    expect(response.body.detail).toBe('The import stopped on an unexpected error. No line was applied.');
    const [job] = await service.service.imports.recent(merchant.id, 1);
    expect(job).toMatchObject({ state: 'failed', error_code: 'internal_error', products_applied: 0, error: response.body.detail });
    expect((await refs()).filter((ref) => ref.startsWith('ERR-'))).toEqual([]);
  } finally {
    admin.applyProductBatchIn = applyProductBatchIn;
  }
});
