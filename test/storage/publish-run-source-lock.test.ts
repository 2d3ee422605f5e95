// A publish run's chunk resolves payloads from the sources it read and writes them in the same
// transaction: a product it read is not rewritten by another transaction (an import) until the
// chunk commits, or the import's new payload would be replaced by one resolved from the older
// source. On PostgreSQL the chunk's read locks the rows (READ COMMITTED lets a concurrent update
// commit otherwise); on SQLite the chunk's transaction is the only writer.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProductSourceDocument } from '../../src/catalog/model.js';
import type { CatalogStorage } from '../../src/storage/port.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';

const AT = '2026-11-26T08:00:00.000Z';
const source = (title: string): ProductSourceDocument => ({
  eans: [],
  manufacturer: null,
  content: { de: { title, description: null } },
  images: [],
  offers: [],
  own_stock: null,
  supplier_attributes: [],
  overrides: {},
  excluded_stores: [],
});

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;
let merchantId: number;

describe.skipIf(onPglite())(`a publish run's chunk and an import of one of its products (${TEST_ENGINE})`, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-run-lock-'));
    database = await createTestDatabase(dir);
    storage = await database.open();
    merchantId = (await storage.createMerchant({ name: 'M', sku_pattern: null, owner_emails: [], created_at: AT })).id;
    await storage.transaction((tx) => tx.upsertProductSource(merchantId, 'X', source('old'), AT));
  });

  afterAll(async () => {
    await storage?.close();
    await database?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('waits for the chunk to commit before it rewrites a product the chunk read, and then writes its own source', async () => {
    const events: string[] = [];
    let importing: Promise<void> | undefined;
    await storage.transaction(async (tx) => {
      const [read] = await tx.productsAfter(merchantId, 0, 500);
      expect(read?.source.content.de?.title).toBe('old');
      importing = storage
        .transaction((other) => other.upsertProductSource(merchantId, 'X', source('new'), '2026-11-26T08:00:01.000Z'))
        .then(() => {
          events.push('import committed');
        });
      // Long enough for an import that did not wait to commit (it takes a few ms).
      await new Promise((resolve) => setTimeout(resolve, 300));
      events.push('chunk commits');
    });
    await importing;
    expect(events).toEqual(['chunk commits', 'import committed']);
    const [after] = await storage.productsAfter(merchantId, 0, 500);
    expect(after?.source.content.de?.title).toBe('new');
  });
});
