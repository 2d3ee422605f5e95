// The NDJSON import (admin `importProducts`) applies a checked file chunk by chunk; each chunk checks
// its lines' references again in its own transaction, so a supplier deleted while the file was
// being read stops the import at that chunk instead of storing offers that name nobody.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkImport, importNdjson, parseImport } from '../../src/admin/import.js';
import { setYieldSlice } from '../../src/shared/cooperative.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchantId: number;

beforeAll(async () => {
  service = await startTestService();
  merchantId = (await service.admin.createMerchant({ name: 'Import Outfitters' })).id;
  await service.admin.upsertStore(merchantId, 'de', {
    name: 'DE',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await service.admin.upsertSupplier(merchantId, 'alpine', 'Alpine');
  await service.admin.upsertSupplier(merchantId, 'baltic', 'Baltic');
});
afterAll(() => service.close());

const line = (ref: string, supplier: string) =>
  JSON.stringify({
    op: 'upsert_product',
    product: { ref, offers: [{ supplier_ref: supplier, quantity: 1, cost: '10.00', currency: 'EUR' }] },
  });

describe('a supplier deleted while an import is read', () => {
  it('answers 409 at the chunk that names it, names its line, and applies nothing of that chunk', async () => {
    const operations = await parseImport(service.admin, merchantId, [line('A-1', 'baltic'), line('A-2', 'alpine')].join('\n'));
    // Checked and valid; then the supplier goes (no product names it yet, so the delete is allowed).
    await service.admin.deleteSupplier(merchantId, 'alpine');
    await expect(service.admin.applyProductBatch(merchantId, operations)).rejects.toMatchObject({
      code: 'conflict',
      detail: expect.stringContaining('line 2'),
    });
    await expect(service.admin.product(merchantId, 'A-1')).rejects.toMatchObject({ code: 'not_found' });
    await expect(service.admin.product(merchantId, 'A-2')).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe("an import that stops part-way (the CLI's, applied by importNdjson)", () => {
  it('says exactly which lines its committed chunks applied', async () => {
    await service.admin.upsertSupplier(merchantId, 'carpathia', 'Carpathia');
    const file = ['B-1', 'B-2', '', 'B-3', 'B-4', 'B-5'].map((ref) => (ref ? line(ref, 'carpathia') : '')).join('\n');
    const applyProductBatch = service.admin.applyProductBatch.bind(service.admin);
    let chunks = 0;
    service.admin.applyProductBatch = async (id, operations) => {
      if (++chunks === 3) throw new Error('the disk is full');
      return applyProductBatch(id, operations);
    };
    try {
      // Chunks of two operations: B-1 and B-2 (lines 1-2), B-3 and B-4 (lines 4-5), then B-5 (line 6) fails.
      await expect(importNdjson(service.admin, merchantId, file, { chunkSize: 2 })).rejects.toMatchObject({
        code: 'internal_error',
        detail: 'The import stopped on an unexpected error. Lines 1-5 were applied (4 operations); line 6 was not.',
      });
    } finally {
      service.admin.applyProductBatch = applyProductBatch;
    }
    expect(
      (await service.storage.productsAfter(merchantId, 0, 100))
        .map((p) => p.ref)
        .filter((ref) => ref.startsWith('B-'))
        .sort(),
    ).toEqual(['B-1', 'B-2', 'B-3', 'B-4']);
  });
});

describe("an import's check shares the event loop", () => {
  const file = (lines: number) => Array.from({ length: lines }, (_, i) => line(`Y-${i + 1}`, 'baltic')).join('\n');

  it('offers the loop to other work after every line it checks, however long the file (counted in lines, not time)', async () => {
    // The yield is injected: it counts the lines checked since the previous offer, whatever the clock.
    let sinceOffer = 0;
    let mostBetweenOffers = 0;
    let offers = 0;
    const checked = await checkImport(
      service.admin,
      merchantId,
      file(500),
      () => {
        sinceOffer++;
        mostBetweenOffers = Math.max(mostBetweenOffers, sinceOffer);
      },
      Infinity,
      undefined,
      async () => {
        offers++;
        sinceOffer = 0;
      },
    );
    expect(checked).toBe(500);
    expect(offers).toBe(499);
    expect(mostBetweenOffers).toBe(1);
  });

  it('answers a read while a large file is being checked (a 1 ms slice)', async () => {
    setYieldSlice(1);
    try {
      const key = await service.keyFor(merchantId);
      let linesChecked = 0;
      let checking = true;
      const check = checkImport(
        service.admin,
        merchantId,
        file(20_000),
        () => {},
        Infinity,
        (lines) => {
          linesChecked = lines;
        },
      ).finally(() => {
        checking = false;
      });
      // Asked once the check has started: answered before it ends.
      await new Promise((resolve) => setImmediate(resolve));
      const answered = await service.api('/v1/stores', key);
      const linesAtAnswer = linesChecked;
      const stillChecking = checking;
      expect(answered.status).toBe(200);
      expect(await check).toBe(20_000);
      expect(stillChecking).toBe(true);
      expect(linesAtAnswer).toBeLessThan(20_000);
    } finally {
      setYieldSlice(5);
    }
  });

  it('stops handing on operations once a line is bad (nothing of the file is applied either way), and still lists every bad line', async () => {
    const lines = [line('Z-1', 'baltic'), '{"op":"upsert_product"}', line('Z-3', 'baltic'), 'not json', line('Z-5', 'baltic')];
    const taken: number[] = [];
    await expect(
      checkImport(service.admin, merchantId, lines.join('\n'), (operation) => {
        taken.push(operation.line);
      }),
    ).rejects.toMatchObject({
      code: 'invalid_body',
      detail: '2 of 5 lines are invalid; nothing was applied.',
      invalidParams: [expect.objectContaining({ name: 'line 2' }), expect.objectContaining({ name: 'line 4' })],
    });
    expect(taken).toEqual([1]);
  });
});
