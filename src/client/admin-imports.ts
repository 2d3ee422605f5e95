// An NDJSON import (`POST …/imports`) from a list of operations: one JSON line each.
import type { AdminClient, ImportOperation, ImportResult } from './admin-types.js';
import { unwrap } from './errors.js';

/** The NDJSON text of an import: one operation per line, each line ending in `\n`. */
export function toNdjson(operations: Iterable<ImportOperation>): string {
  let text = '';
  for (const operation of operations) text += `${JSON.stringify(operation)}\n`;
  return text;
}

/**
 * Upserts and deletes a merchant's products in one import (needs `catalog:write`) and returns its
 * counts once every line is applied. The whole file is checked first: a bad line throws a
 * CatalogApiError (`400 invalid_body`, each bad line named `line N` in `invalid_params`) and
 * applies nothing. Upserts replace the whole product, so sending the same import again is safe.
 *
 * ```ts
 * await importProducts(admin, 1, [
 *   { op: 'upsert_product', product: { ref: 'BP-40', offers: [{ supplier_ref: 'alpine', quantity: 5, cost: '20.00', currency: 'EUR' }] } },
 *   { op: 'delete_product', ref: 'BP-30' },
 * ]);
 * ```
 */
export function importProducts(
  client: AdminClient,
  merchantId: number,
  operations: Iterable<ImportOperation>,
  { signal }: { signal?: AbortSignal } = {},
): Promise<ImportResult> {
  return unwrap(
    client.POST('/admin/v1/merchants/{merchant_id}/imports', {
      params: { path: { merchant_id: merchantId } },
      body: toNdjson(operations),
      signal,
    }),
  ) as Promise<ImportResult>;
}
