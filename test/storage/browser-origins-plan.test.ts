// A CORS preflight carries no key, so it asks for the origins of every active key of the deployment
// (storage: browserOrigins; http/browser-cors.ts, read at most once per CPS_API_KEY_CACHE_MS per
// process). The keys that list origins are few among all keys: the statement reads them from the
// partial index of keys with origins (migration 61), not every key of every merchant.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import { postgresRowsRead, recordStatements, sqlitePlan, statementsOf } from '../support/statement-plans.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';

const AT = '2026-11-30T00:00:00.000Z';
const KEYS = 3000;

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;

describe.skipIf(onPglite())(`the origins of a preflight among ${KEYS.toLocaleString('en')} keys (${TEST_ENGINE})`, () => {
  beforeAll(async () => {
    recordStatements();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-origins-plan-'));
    database = await createTestDatabase(dir);
    storage = await database.open();
    const merchant = (await storage.createMerchant({ name: 'Many keys', sku_pattern: null, owner_emails: [], created_at: AT })).id;
    await storage.transaction(async (tx) => {
      for (let n = 0; n < KEYS; n++) {
        await tx.insertApiKey({
          merchant_id: merchant,
          name: `key ${n}`,
          prefix: `cps_${String(n).padStart(8, '0')}`,
          key_hash: Buffer.from(String(n).padStart(32, '0')),
          created_at: AT,
          ...(n % 1000 === 7 ? { allowed_origins: [`https://shop-${n}.example`] } : {}),
        });
      }
    });
    if (TEST_ENGINE === 'postgres') {
      const client = new pg.Client(database.location);
      await client.connect();
      await client.query('ANALYZE api_keys');
      await client.end();
    } else {
      const db = new Database(database.location);
      db.exec('ANALYZE');
      db.close();
    }
  }, 120_000);

  afterAll(async () => {
    await storage?.close();
    await database?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads the keys with origins from their index, not every key', async () => {
    let origins: string[] = [];
    const ran = await statementsOf(async () => {
      origins = await storage.browserOrigins(AT);
    });
    expect(origins.sort()).toEqual(['https://shop-1007.example', 'https://shop-2007.example', 'https://shop-7.example']);
    expect(ran).toHaveLength(1);
    if (TEST_ENGINE === 'sqlite') {
      const plan = sqlitePlan(database.location, ran[0]!).join('\n');
      expect(plan).toContain('api_keys_with_origins');
      expect(plan).not.toMatch(/^SCAN api_keys$/m);
    } else {
      expect(await postgresRowsRead(database.location, ran[0]!)).toBeLessThanOrEqual(10);
    }
  });
});
