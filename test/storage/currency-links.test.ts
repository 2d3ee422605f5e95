// Migration 33: the currencies a product's costs are in (its offers', its own stock's)
// become links of the product, so that which stores a changed exchange rate can re-price is a probe
// of product_links per currency. A catalog written before the migration gets its products' currency
// links and keeps every other link; after it, the links follow each source as the others do.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import type { ProductSourceDocument } from '../../src/catalog/model.js';
import { migrations as sqliteMigrations } from '../../src/storage/sqlite/migrations.js';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';
import { onPglite, TEST_ENGINE } from '../support/engine.js';
import { testPostgres } from '../support/postgres.js';

const AT = '2026-11-26T08:00:00.000Z';
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

const source = (patch: Partial<ProductSourceDocument>): ProductSourceDocument => ({
  eans: [],
  manufacturer: null,
  content: { de: { title: 'T', description: null } },
  images: [],
  offers: [],
  own_stock: null,
  supplier_attributes: [],
  overrides: {},
  excluded_stores: [],
  ...patch,
});

/** Sources as a catalog before migration 33 holds them: USD and EUR offers, a GBP own stock, an own stock without a cost. */
const BEFORE: [string, ProductSourceDocument][] = [
  [
    'P-1',
    source({
      images: [{ url: 'https://img.example/1.jpg' }],
      offers: [
        { supplier_ref: 'alpine', quantity: 1, cost: '1.00', currency: 'USD' },
        { supplier_ref: 'baltic', quantity: 1, cost: '1.00', currency: 'EUR' },
      ],
    }),
  ],
  ['P-2', source({ own_stock: { quantity: 2, cost: '3.00', currency: 'GBP' } })],
  ['P-3', source({ own_stock: { quantity: 2, cost: null, currency: null } })],
];
const ASKED = ['EUR', 'GBP', 'JPY', 'USD'];

/** After the migration: the currencies are linked, the older links kept, and links follow new sources. */
async function expectMigrated(storage: CatalogStorage, merchantId: number): Promise<void> {
  expect((await storage.currenciesInUse(merchantId, ASKED)).sort()).toEqual(['EUR', 'GBP', 'USD']);
  expect(await storage.currenciesInUse(merchantId + 1, ASKED)).toEqual([]);
  expect(await storage.isSupplierReferenced(merchantId, 'baltic')).toBe(true);
  expect(await storage.productIdsWithImage(merchantId, 'https://img.example/1.jpg')).toEqual([1]);
  await storage.transaction((tx) =>
    tx.upsertProductSource(
      merchantId,
      'P-1',
      source({
        offers: [{ supplier_ref: 'baltic', quantity: 1, cost: '1.00', currency: 'EUR' }],
      }),
      AT,
    ),
  );
  await storage.transaction((tx) =>
    tx.upsertProductSource(merchantId, 'P-4', source({ own_stock: { quantity: 1, cost: '9', currency: 'JPY' } }), AT),
  );
  expect((await storage.currenciesInUse(merchantId, ASKED)).sort()).toEqual(['EUR', 'GBP', 'JPY']);
}

describe.skipIf(TEST_ENGINE !== 'sqlite')('SQLite: migration 33 on a catalog written before it', () => {
  it('links every product to the currencies of its offers and own stock, keeping the other links', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-currency-links-'));
    dirs.push(dir);
    const file = path.join(dir, 'catalog.db');
    const db = new Database(file);
    db.exec('CREATE TABLE schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    for (const migration of sqliteMigrations.filter((m) => m.id < 33)) {
      db.exec(migration.sql);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(migration.id, migration.name, AT);
    }
    db.prepare("INSERT INTO merchants (name, created_at) VALUES ('Before', ?)").run(AT);
    for (const [ref, s] of BEFORE)
      db.prepare('INSERT INTO products (merchant_id, ref, source, updated_at) VALUES (1, ?, ?, ?)').run(ref, JSON.stringify(s), AT);
    // The links migration 16 and the sources' writes kept before 33.
    db.exec(`INSERT INTO product_links (merchant_id, kind, value, product_id) VALUES
      (1, 'image', 'https://img.example/1.jpg', 1), (1, 'supplier', 'alpine', 1), (1, 'supplier', 'baltic', 1)`);
    db.close();

    const storage = openSqliteStorage(file);
    try {
      expect(await storage.missingMigrations()).toEqual([]);
      await expectMigrated(storage, 1);
    } finally {
      await storage.close();
    }
  });
});

describe.skipIf(TEST_ENGINE !== 'postgres' || onPglite())('PostgreSQL: migration 33 on a catalog written before it', () => {
  it('links every product to the currencies of its offers and own stock, keeping the other links', async () => {
    const { migrations, statementsOf } = await import('../../src/storage/postgres/migrations.js');
    const { openPostgresStorage } = await import('../../src/storage/postgres/index.js');
    const server = testPostgres();
    if (server.kind !== 'server') throw new Error('needs a server');
    const name = `cps_before_33_${process.pid}`;
    const admin = new pg.Client(server.url);
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.query(`CREATE DATABASE ${name}`);
    const url = server.url.replace(/\/[^/]*$/, `/${name}`);
    const before = new pg.Client(url);
    await before.connect();
    let opened: Awaited<ReturnType<typeof openPostgresStorage>> | undefined;
    try {
      await before.query(
        'CREATE TABLE schema_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at text COLLATE "C" NOT NULL)',
      );
      for (const migration of migrations.filter((m) => m.id < 33)) {
        for (const statement of statementsOf(migration.sql)) await before.query(statement);
        await before.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [migration.id, migration.name, AT]);
      }
      await before.query(`INSERT INTO merchants (name, created_at) VALUES ('Before', $1)`, [AT]);
      for (const [ref, s] of BEFORE) {
        await before.query('INSERT INTO products (merchant_id, ref, source, updated_at) VALUES (1, $1, $2, $3)', [
          ref,
          JSON.stringify(s),
          AT,
        ]);
      }
      await before.query(`INSERT INTO product_links (merchant_id, kind, value, product_id) VALUES
        (1, 'image', 'https://img.example/1.jpg', 1), (1, 'supplier', 'alpine', 1), (1, 'supplier', 'baltic', 1)`);

      opened = openPostgresStorage(url);
      await opened.ready;
      expect(await opened.missingMigrations()).toEqual([]);
      await expectMigrated(opened, 1);
    } finally {
      await opened?.close();
      await before.end();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  }, 60_000);
});
