// /metrics' outbox depth (storage `operationalCounts`) sums product_count over the outbox's first
// CPS_METRICS_COUNT_MAX rows. An outbox row carries the product ids of a write's chunk (thousands
// of them: kilobytes), and product_count comes after them in the row: the sum is read from the
// waiting index (migration 52), never from the rows, so a scrape costs the same however many
// products each waiting row carries.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';
import { postgresRowsRead, recordStatements, sqlitePlan, statementsOf } from '../support/statement-plans.js';

const AT = '2026-11-29T06:00:00.000Z';

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;

describe.skipIf(onPglite())(`the outbox depth of /metrics (${TEST_ENGINE})`, () => {
  beforeAll(async () => {
    recordStatements();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-outbox-depth-'));
    database = await createTestDatabase(dir);
    storage = await database.open();
    const merchant = (await storage.createMerchant({ name: 'Outbox', sku_pattern: null, owner_emails: [], created_at: AT })).id;
    const store = await storage.upsertStore(merchant, 'de', {
      name: 'DE',
      locale: 'de-DE',
      currency: 'EUR',
      is_default: true,
      active: true,
      exclude_out_of_stock: false,
    });
    const endpoint = await storage.createWebhookEndpoint({
      merchant_id: merchant,
      url: 'https://hooks.example/catalog',
      store_id: null,
      events: ['price'],
      secret: 'whsec_x',
      created_at: AT,
    });
    // 300 rows of 1,000 products each: a re-pricing's chunks for one endpoint.
    await storage.transaction(async (tx) => {
      await tx.insertOutbox(
        Array.from({ length: 300 }, (_, row) => ({
          endpointId: endpoint.id,
          event: 'price' as const,
          storeId: store.id,
          productIds: Array.from({ length: 1000 }, (_, i) => row * 1000 + i + 1),
          createdAt: AT,
        })),
      );
    });
  });
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("sums the waiting rows' products from the waiting index, reading none of their product ids", async () => {
    let depth = 0;
    const ran = await statementsOf(async () => {
      depth = (await storage.operationalCounts(1_000_000)).outboxDepth;
    });
    expect(depth).toBe(300_000);
    const sum = ran.find((statement) => /sum\(product_count\)/.test(statement.sql));
    expect(sum).toBeDefined();
    if (TEST_ENGINE === 'sqlite') {
      // The table is not read: a scan of the index that carries the count.
      expect(sqlitePlan(database.location, sum!).join('\n')).toMatch(/SCAN webhook_outbox USING COVERING INDEX webhook_outbox_waiting/);
    } else {
      // PostgreSQL reads each waiting row once at most (product_ids, TOASTed, is not fetched for the sum).
      expect(await postgresRowsRead(database.location, sum!)).toBeLessThanOrEqual(300);
    }
  });
});
