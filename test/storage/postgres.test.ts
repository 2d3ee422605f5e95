// The PostgreSQL engine on a real server started from the local binaries: migrations applied once
// by processes opening together, every core aggregate answering as the SQLite engine does (the same
// calls on both, compared), page bytes identical to SQLite's, and the change feed's per-merchant
// sequencer exact under concurrent writers.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogStorage, PublishedRow } from '../../src/storage/port.js';
import type { ProductSourceDocument } from '../../src/catalog/model.js';
import { migrations } from '../../src/storage/postgres/migrations.js';
import { openPostgresStorage, type PostgresOptions, type PostgresStorage } from '../../src/storage/postgres/index.js';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';
import { startTestPostgres, type TestPostgres } from './pg-server.js';
import { nodeArguments } from '../support/node-command.js';

let server: TestPostgres;
const opened: CatalogStorage[] = [];
let databases = 0;

beforeAll(async () => {
  server = await startTestPostgres();
});

afterAll(async () => {
  await Promise.all(opened.splice(0).map((storage) => storage.close().catch(() => {})));
  await server?.stop();
});

/** A fresh database on the test server. */
const freshDatabase = () => server.createDatabase(`cps_${++databases}`);

async function openFresh(options: PostgresOptions = {}): Promise<PostgresStorage> {
  const storage = openPostgresStorage(await freshDatabase(), options);
  opened.push(storage);
  return storage;
}

function openSqlite(): CatalogStorage {
  const storage = openSqliteStorage(':memory:');
  opened.push(storage);
  return storage;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const T0 = '2026-11-26T10:00:00Z';

describe('migrations', () => {
  it('apply once when three processes open a fresh database together', async () => {
    const url = await freshDatabase();
    const storages = [openPostgresStorage(url), openPostgresStorage(url), openPostgresStorage(url)];
    opened.push(...storages);
    await Promise.all(storages.map((storage) => storage.ready));
    const client = new pg.Client(url);
    await client.connect();
    try {
      const { rows } = await client.query('SELECT id, name FROM schema_migrations ORDER BY id');
      expect(rows).toEqual(migrations.map(({ id, name }) => ({ id, name })));
      expect(new Set(rows.map((r) => r.id)).size).toBe(migrations.length);
    } finally {
      await client.end();
    }
    for (const storage of storages) expect(await storage.missingMigrations()).toEqual([]);
  });

  it('are waited for by every operation called right after opening', async () => {
    const storage = openPostgresStorage(await freshDatabase());
    opened.push(storage);
    expect(await storage.countMerchants()).toBe(0);
    expect(await storage.missingMigrations()).toEqual([]);
    await storage.ping();
  });

  it("store an import's staged chunks as they are, uncompressed (migration 54), and read them back whole", async () => {
    const url = await freshDatabase();
    const storage = openPostgresStorage(url);
    opened.push(storage);
    const merchant = await storage.createMerchant({ name: 'Chunks', sku_pattern: null, owner_emails: [], created_at: T0 });
    const job = await storage.insertImportJob({
      merchant_id: merchant.id,
      started_by: 'test',
      file_name: null,
      state: 'running',
      started_at: T0,
      updated_at: T0,
      finished_at: null,
      lines_read: 0,
      operations: null,
      products_applied: 0,
      upserted: 0,
      deleted: 0,
      error: null,
      error_code: null,
      problems: [],
    });
    // A chunk's text as staged: repetitive JSON, which compression would have shrunk to a tenth.
    const operations = `[${Array.from({ length: 500 }, (_, i) => JSON.stringify({ op: 'upsert_product', ref: `R-${i}`, line: i + 1 })).join(',\n')}]`;
    await storage.transaction((tx) => tx.insertImportChunks(job.id, [{ seq: 1, operations }]));
    expect(await storage.nextImportChunk(job.id)).toEqual({ seq: 1, operations });
    const client = new pg.Client(url);
    await client.connect();
    try {
      const { rows } = await client.query(
        `SELECT a.attstorage, (SELECT pg_column_size(operations) FROM import_job_chunks WHERE job_id = $1) AS stored
        FROM pg_attribute AS a WHERE a.attrelid = 'import_job_chunks'::regclass AND a.attname = 'operations'`,
        [job.id],
      );
      expect(rows).toEqual([{ attstorage: 'e', stored: operations.length }]);
    } finally {
      await client.end();
    }
  });

  it('report every migration missing on a database nobody could migrate', async () => {
    const url = await freshDatabase();
    // A pool that answers queries but never hands out a client for migrating: ping and
    // missingMigrations still read the database as it is (what /readyz shows).
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    const storage = openPostgresStorage(url, {
      pool: { query: pool.query.bind(pool), connect: () => Promise.reject(new Error('no client for migrating')), end: () => pool.end() },
    });
    opened.push(storage);
    await expect(storage.ready).rejects.toThrow('no client for migrating');
    await storage.ping();
    expect(await storage.missingMigrations()).toEqual(migrations.map((m) => m.id));
    await expect(storage.countMerchants()).rejects.toThrow('no client for migrating');
  });
});

// The same calls on both engines: every answer must be the same.

const source = (overrides: Partial<ProductSourceDocument>): ProductSourceDocument =>
  ({
    manufacturer: 'ACME',
    eans: [],
    images: [],
    offers: [],
    supplier_attributes: [],
    overrides: {},
    excluded_stores: [],
    ...overrides,
  }) as unknown as ProductSourceDocument;

// Payloads as the domain writes them: number literals of the currency's precision (12.50), escapes,
// characters of 2, 3 and 4 UTF-8 bytes.
const PAYLOADS: PublishedRow[] = [
  {
    productId: 1,
    payload:
      '{"id":1,"title":"Zażółć \\"gęślą\\" jaźń","sku":"SKU-1","ean":"5901234123457","prices":[{"customer_group":null,"amount":12.50,"currency":"PLN"}],"excluded":false,"exclusion_reason":null}',
    priceHash: 'p1',
    contentHash: 'c1',
  },
  {
    productId: 2,
    payload:
      '{"id":2,"title":"Mug ☕ 🍵","sku":"SKU-2","ean":null,"prices":[{"customer_group":3,"amount":1000,"currency":"EUR"},{"customer_group":null,"amount":9.990,"currency":"EUR"}],"excluded":true,"exclusion_reason":"out_of_stock"}',
    priceHash: 'p2',
    contentHash: 'c2',
  },
  {
    productId: 7,
    payload:
      '{"id":7,"title":null,"sku":"SKU-7","ean":"4006381333931","prices":[],"excluded":true,"exclusion_reason":"missing_title","note":"line\\u2028sep\\n"}',
    priceHash: 'p7',
    contentHash: 'c7',
  },
  {
    productId: 12,
    payload:
      '{"id":12,"title":"Plain","sku":"SKU-1","ean":"5901234123457","prices":[{"amount":0.5}],"excluded":true,"exclusion_reason":"manual"}',
    priceHash: 'p12',
    contentHash: 'c12',
  },
];

const hex = (bytes: Uint8Array | undefined) => (bytes === undefined ? undefined : Buffer.from(bytes).toString('hex'));

async function exercise(storage: CatalogStorage): Promise<Record<string, unknown>> {
  const log: Record<string, unknown> = {};
  // Tenancy
  const merchant = await storage.createMerchant({ name: 'Acme', sku_pattern: null, owner_emails: ['a@example.com'], created_at: T0 });
  const other = await storage.createMerchant({ name: 'Other', sku_pattern: '^X', owner_emails: [], created_at: T0 });
  log.merchants = [merchant, other];
  log.updatedMerchant = await storage.updateMerchant(merchant.id, { owner_emails: ['a@example.com', 'b@example.com'] });
  log.missingMerchant = await storage.updateMerchant(999, { name: 'x' });
  log.listMerchants = await storage.listMerchants();
  log.getMerchant = await storage.getMerchant(other.id);
  log.countMerchants = await storage.countMerchants();
  const hash = Buffer.from('a'.repeat(64), 'hex');
  log.key = await storage.insertApiKey({ merchant_id: merchant.id, name: 'cli', prefix: 'pk_live_ab', key_hash: hash, created_at: T0 });
  log.activeKey = await storage.findActiveApiKey(hash);
  log.revoked = [await storage.revokeApiKey(merchant.id, 1, '2026-11-26T11:00:00Z'), await storage.revokeApiKey(other.id, 1, T0)];
  await storage.revokeApiKey(merchant.id, 1, '2026-11-26T12:00:00Z');
  log.keys = await storage.listApiKeys(merchant.id);
  log.activeAfterRevoke = await storage.findActiveApiKey(hash);
  const store = { name: 'Polska', locale: 'pl-PL', currency: 'PLN', is_default: true, active: true, exclude_out_of_stock: false };
  const pl = await storage.upsertStore(merchant.id, 'pl', store);
  const de = await storage.upsertStore(merchant.id, 'de', { ...store, name: 'Deutschland', locale: 'de-DE', currency: 'EUR' });
  log.plUpdated = await storage.upsertStore(merchant.id, 'pl', { ...store, is_default: false, exclude_out_of_stock: true });
  const temp = await storage.upsertStore(merchant.id, 'temp', { ...store, is_default: false });
  await storage.deleteStore(temp.id);
  log.afterDeleted = await storage.upsertStore(merchant.id, 'cz', { ...store, is_default: false, name: 'Česko' });
  await storage.bumpCatalogVersion([pl.id, de.id]);
  await storage.bumpCatalogVersion([]);
  log.stores = await storage.listStores(merchant.id);
  log.findStore = [await storage.findStore(merchant.id, 'de'), await storage.findStore(other.id, 'de')];
  log.defaultStore = [await storage.findDefaultStore(merchant.id), await storage.findDefaultStore(other.id)];

  // Catalog setup
  const retail = await storage.createCustomerGroup(merchant.id, 'retail');
  const wholesale = await storage.createCustomerGroup(merchant.id, 'wholesale');
  log.groups = [
    retail,
    wholesale,
    await storage.updateCustomerGroup(merchant.id, wholesale.id, 'trade'),
    await storage.updateCustomerGroup(other.id, wholesale.id, 'x'),
    await storage.deleteCustomerGroup(merchant.id, retail.id),
    await storage.deleteCustomerGroup(merchant.id, retail.id),
    await storage.listCustomerGroups(merchant.id),
  ];
  for (const [base, quote, rate] of [
    ['PLN', 'EUR', '0.23'],
    ['EUR', 'PLN', '4.30'],
    ['EUR', 'CZK', '25.1'],
    ['PLN', 'EUR', '0.24'],
  ] as const) {
    await storage.upsertExchangeRate(merchant.id, { base, quote, rate });
  }
  log.rates = [
    await storage.deleteExchangeRate(merchant.id, 'EUR', 'CZK'),
    await storage.deleteExchangeRate(merchant.id, 'EUR', 'CZK'),
    await storage.listExchangeRates(merchant.id),
  ];
  const rule = {
    priority: 10,
    customer_group_id: wholesale.id,
    store_id: de.id,
    manufacturer: 'ACME',
    min_cost: '1.00',
    max_cost: null,
    markup_percent: '12.5',
    markup_amount: '0',
    price_ending: 99,
  };
  const catchAll = await storage.createPricingRule(
    merchant.id,
    { ...rule, priority: 1000, customer_group_id: null, store_id: null, manufacturer: null },
    true,
  );
  const created = await storage.createPricingRule(merchant.id, rule);
  log.rules = [
    catchAll,
    created,
    await storage.updatePricingRule(merchant.id, created.id, { ...rule, priority: 5, price_ending: null }),
    await storage.updatePricingRule(other.id, created.id, rule),
    await storage.getPricingRule(merchant.id, created.id),
    await storage.deletePricingRule(merchant.id, catchAll.id),
    await storage.listPricingRules(merchant.id),
  ];
  log.suppliers = [
    await storage.upsertSupplier(merchant.id, 'S1', 'First'),
    await storage.upsertSupplier(merchant.id, 'S2', 'Second'),
    await storage.upsertSupplier(merchant.id, 'S1', 'First, renamed'),
    await storage.upsertSupplier(merchant.id, 'S3', 'Third'),
    await storage.deleteSupplier(merchant.id, 'S3'),
    await storage.deleteSupplier(merchant.id, 'S3'),
    await storage.listSuppliers(merchant.id),
  ];
  for (const key of ['color', 'Weight', 'a_b', 'Zeta']) {
    await storage.upsertAttributeDefinition(merchant.id, {
      key,
      unit: key === 'Weight' ? 'kg' : null,
      labels: { en: key, pl: `${key} ł` },
    });
  }
  await storage.upsertAttributeDefinition(merchant.id, { key: 'color', unit: null, labels: { en: 'Colour' } });
  log.attributes = [await storage.deleteAttributeDefinition(merchant.id, 'Zeta'), await storage.listAttributeDefinitions(merchant.id)];

  // Product sources
  const sources = [
    ['A-1', source({ images: [{ url: 'https://img.example/1.jpg' }], offers: [{ supplier_ref: 'S1' }] as never, excluded_stores: ['de'] })],
    [
      'A-2',
      source({
        images: [{ url: 'https://img.example/1.jpg' }, { url: 'https://img.example/2.jpg' }],
        supplier_attributes: [{ supplier_ref: 'S2', key: 'color', value: 'red' }] as never,
      }),
    ],
    ['A-3', source({ manufacturer: 'Zażółć', excluded_stores: ['de', 'pl'] })],
  ] as const;
  log.upserts = [];
  for (const [ref, document] of sources) (log.upserts as unknown[]).push(await storage.upsertProductSource(merchant.id, ref, document, T0));
  (log.upserts as unknown[]).push(await storage.upsertProductSource(merchant.id, 'A-1', { ...sources[0][1], manufacturer: 'Renamed' }, T0));
  (log.upserts as unknown[]).push(await storage.upsertProductSource(merchant.id, 'A-4', source({}), T0));
  log.byRef = [await storage.findProductByRef(merchant.id, 'A-1'), await storage.findProductByRef(other.id, 'A-1')];
  log.excludedFrom = [await storage.productsExcludedFrom(merchant.id, 'de'), await storage.productsExcludedFrom(merchant.id, 'pl')];
  log.after = [await storage.productsAfter(merchant.id, 1, 2), await storage.productsAfter(merchant.id, 4, 10)];
  log.byIds = [await storage.productsByIds(merchant.id, [3, 1, 99]), await storage.productsByIds(merchant.id, [])];
  log.withImage = [
    await storage.productIdsWithImage(merchant.id, 'https://img.example/1.jpg'),
    await storage.productIdsWithImage(merchant.id, 'none'),
  ];
  log.referenced = [
    await storage.isSupplierReferenced(merchant.id, 'S1'),
    await storage.isSupplierReferenced(merchant.id, 'S2'),
    await storage.isSupplierReferenced(merchant.id, 'S9'),
    await storage.isSupplierReferenced(other.id, 'S1'),
  ];
  await storage.deleteProduct(merchant.id, 4);
  log.afterDelete = await storage.productsAfter(merchant.id, 0, 10);

  // Published payloads: bytes compared as hex, so a difference shows where it is
  await storage.upsertPublished(pl.id, PAYLOADS.slice(0, 2));
  await storage.upsertPublished(pl.id, [{ ...PAYLOADS[0]!, payload: '{"stale":true}' }, ...PAYLOADS.slice(2), PAYLOADS[0]!]);
  await storage.upsertPublished(de.id, [PAYLOADS[1]!]);
  log.hashes = [...(await storage.publishedHashes(pl.id, [1, 7, 99])).entries()];
  log.payload = [hex(await storage.publishedPayload(pl.id, 2)), hex(await storage.publishedPayload(pl.id, 3))];
  const pages = [
    [1, 12],
    [2, 7],
    [3, 6],
    [13, 100],
  ];
  log.pages = [];
  for (const [from, to] of pages) {
    const page = await storage.publishedPage(pl.id, from!, to!);
    (log.pages as unknown[]).push([hex(page.bytes), hex(page.digests)]);
  }
  log.ids = await storage.publishedProductIds(pl.id);
  const byIds = async (ids: number[]) => {
    const { bytes, count } = await storage.publishedPayloadsByIds(pl.id, ids);
    return [hex(bytes), count, hex(await storage.publishedPricesByIds(pl.id, ids))];
  };
  log.byIdsPublished = [await byIds([12, 1, 2, 99]), await byIds([]), await byIds([99]), await byIds([7])];
  log.find = [
    await storage.findPublishedProducts(pl.id, { sku: 'SKU-1' }, 10),
    await storage.findPublishedProducts(pl.id, { ean: '5901234123457', sku: 'SKU-1' }, 1),
    await storage.findPublishedProducts(pl.id, { ean: '4006381333931' }, 10),
    await storage.findPublishedProducts(pl.id, {}, 10),
  ];
  log.summaries = [
    await storage.publishedSummaries(pl.id, { afterId: 0, limit: 10 }),
    await storage.publishedSummaries(pl.id, { afterId: 1, limit: 2 }),
    await storage.publishedSummaries(pl.id, { afterId: 0, limit: 10, excludedOnly: true }),
  ];
  log.counts = [await storage.publishedCountsByExclusion(pl.id), await storage.publishedCountsByExclusion(de.id)];
  await storage.deletePublished(pl.id, [2, 99]);
  await storage.deletePublished(pl.id, []);
  log.afterDeletePublished = await storage.publishedProductIds(pl.id);

  // Panel accounts
  const token = Buffer.from('01'.repeat(32), 'hex');
  const link = {
    merchant_id: merchant.id,
    email: 'new@example.com',
    role: 'owner' as const,
    purpose: 'invitation' as const,
    created_at: T0,
    expires_at: '2026-11-29T10:00:00Z',
  };
  log.invitation = [
    await storage.insertPanelInvitation(token, link),
    await storage.panelInvitation(token),
    await storage.panelInvitation(Buffer.alloc(32)),
  ];
  log.used = [
    await storage.markPanelInvitationUsed(token, '2026-11-26T10:05:00Z'),
    await storage.markPanelInvitationUsed(token, '2026-11-26T10:06:00Z'),
  ];
  log.usedInvitation = await storage.panelInvitation(token);
  await storage.insertPanelInvitation(Buffer.alloc(32, 5), { ...link, email: 'b@example.com' });
  await storage.insertPanelInvitation(Buffer.alloc(32, 6), { ...link, email: 'b@example.com', purpose: 'reset' });
  await storage.insertPanelInvitation(Buffer.alloc(32, 7), { ...link, email: 'c@example.com', expires_at: '2026-11-26T10:00:00Z' });
  const c = await storage.insertPanelInvitation(Buffer.alloc(32, 8), { ...link, email: 'c@example.com' });
  log.pending = await storage.listPendingPanelInvitations(merchant.id, '2026-11-26T11:00:00Z');
  log.revoked = [
    await storage.revokePanelInvitations(merchant.id, { email: 'b@example.com' }, '2026-11-26T11:00:00Z'),
    await storage.revokePanelInvitations(other.id, { id: c.id }, '2026-11-26T11:00:00Z'),
    await storage.revokePanelInvitations(merchant.id, { id: c.id }, '2026-11-26T11:00:00Z'),
    await storage.markPanelInvitationUsed(Buffer.alloc(32, 8), '2026-11-26T11:01:00Z'),
    await storage.listPendingPanelInvitations(merchant.id, '2026-11-26T09:00:00Z'),
  ];
  const user = await storage.upsertPanelUser(
    { merchant_id: merchant.id, email: 'new@example.com', role: 'owner', created_at: T0 },
    'scrypt$1',
  );
  log.users = [
    user,
    await storage.upsertPanelUser(
      { merchant_id: merchant.id, email: 'new@example.com', role: 'member', created_at: '2026-11-27T00:00:00Z' },
      'scrypt$2',
    ),
    await storage.upsertPanelUser({ merchant_id: other.id, email: 'new@example.com', role: 'owner', created_at: T0 }, 'scrypt$3'),
    await storage.upsertPanelUser({ merchant_id: merchant.id, email: 'second@example.com', role: 'member', created_at: T0 }, 'scrypt$4'),
    await storage.panelUserByEmail('new@example.com'),
    await storage.panelUserByEmail('none@example.com'),
    await storage.panelUser(user.id),
    await storage.listPanelUsers(merchant.id),
  ];
  const session = Buffer.from('02'.repeat(32), 'hex');
  const operatorSession = Buffer.from('03'.repeat(32), 'hex');
  await storage.insertPanelSession(session, {
    user_id: user.id,
    csrf_token: 'csrf',
    created_at: T0,
    last_seen_at: T0,
    expires_at: '2026-11-26T22:00:00Z',
  });
  await storage.insertPanelSession(operatorSession, {
    user_id: null,
    csrf_token: 'csrf-op',
    created_at: T0,
    last_seen_at: T0,
    expires_at: '2026-11-26T22:00:00Z',
  });
  await storage.touchPanelSession(session, '2026-11-26T10:30:00Z');
  log.sessions = [await storage.panelSession(session), await storage.panelSession(operatorSession)];
  const flash = await storage.insertPanelFlash(session, Buffer.from('sealed'), '2026-11-26T10:10:00Z');
  await storage.insertPanelFlash(session, Buffer.from('old'), '2026-11-26T10:01:00Z');
  log.flashes = [
    await storage.takePanelFlash(operatorSession, flash),
    await storage.deleteExpiredPanelFlashes('2026-11-26T10:05:00Z'),
    await storage.takePanelFlash(session, flash),
    await storage.takePanelFlash(session, flash),
  ].map((f) => (f && typeof f === 'object' ? { ...f, sealed: Buffer.from(f.sealed).toString() } : f));
  log.owners = [await storage.panelOwnerIds(merchant.id), await storage.panelOwnerIds(other.id)];
  await storage.setPanelUserPassword(user.id, 'scrypt$5');
  log.passwordSet = (await storage.panelUserByEmail('new@example.com'))!.password_hash;
  await storage.insertPanelSession(Buffer.alloc(32, 9), {
    user_id: user.id,
    csrf_token: 'csrf-2',
    created_at: T0,
    last_seen_at: T0,
    expires_at: '2026-11-26T22:00:00Z',
  });
  log.sessionsOfUser = [
    await storage.deletePanelSessionsOfUser(user.id, Buffer.alloc(32, 9)),
    await storage.panelSession(Buffer.alloc(32, 9)),
  ];
  await storage.deletePanelSession(operatorSession);
  log.deletedSession = await storage.panelSession(operatorSession);
  log.deleteUser = [await storage.deletePanelUser(other.id, user.id), await storage.deletePanelUser(merchant.id, user.id)];
  log.sessionOfDeleted = await storage.panelSession(session);
  await storage.recordSignInFailure(['account:new@example.com', 'address:127.0.0.1'], '2026-11-26T10:00:01Z');
  await storage.recordSignInFailure(['account:new@example.com'], '2026-11-26T10:00:02Z');
  await storage.recordSignInFailure(['address:127.0.0.1'], '2026-11-26T09:00:00Z');
  log.failures = [
    ...(await storage.countSignInFailures(['account:new@example.com', 'address:127.0.0.1', 'x'], '2026-11-26T09:30:00Z')).entries(),
  ];
  await storage.clearSignInFailures('account:new@example.com');
  log.failuresAfterClear = [
    ...(await storage.countSignInFailures(['account:new@example.com', 'address:127.0.0.1'], '2026-11-26T08:00:00Z')).entries(),
  ];
  for (const action of ['store.update', 'key.create', 'user.invite']) {
    await storage.insertAuditEntry({ merchant_id: merchant.id, at: T0, actor: 'operator', action, detail: `{"a":"${action}"}` });
  }
  log.audit = await storage.listAuditEntries(merchant.id, 2);

  // Changes: the merchant's sequence, a clock that steps back, pruning and horizons
  const change = (storeId: number, productId: number) => ({ storeId, productId, changeType: 'price' as const });
  await storage.recordChanges(merchant.id, [change(pl.id, 1), change(de.id, 1), change(pl.id, 2)], new Date('2026-10-01T00:00:00.900Z'));
  await storage.recordChanges(other.id, [change(pl.id, 9)], new Date('2026-10-01T00:00:03Z'));
  await storage.recordChanges(merchant.id, [change(pl.id, 3)], new Date('2026-09-30T23:59:00Z'));
  await storage.recordChanges(merchant.id, [change(pl.id, 4), change(de.id, 4)], new Date('2026-11-20T00:00:00Z'));
  await storage.recordChanges(merchant.id, [], new Date('2026-11-21T00:00:00Z'));
  const everything = { at: '', id: 0 };
  log.feeds = [
    await storage.changesAfter(pl.id, everything, 100),
    await storage.changesAfter(de.id, everything, 100),
    await storage.changesAfter(pl.id, { at: '2026-10-01T00:00:00Z', id: 3 }, 2),
  ];
  log.pruned = [
    await storage.pruneChangesBefore('2026-10-15T00:00:00Z', 2),
    await storage.changeHorizon(pl.id),
    await storage.changeHorizon(de.id),
    await storage.pruneChangesBefore('2026-10-15T00:00:00Z', 100),
    await storage.changeHorizon(pl.id),
    await storage.changesAfter(pl.id, everything, 100),
  ];
  return log;
}

describe('the core aggregates', () => {
  it('answer every call as the SQLite engine does', async () => {
    const sqlite = await exercise(openSqlite());
    const postgres = await exercise(await openFresh());
    for (const key of Object.keys(sqlite)) expect(postgres[key], key).toEqual(sqlite[key]);
    expect(Object.keys(postgres)).toEqual(Object.keys(sqlite));
  });

  it('serve published pages, ?ids= and prices as the very bytes SQLite serves', async () => {
    const engines = [openSqlite(), await openFresh()];
    const answers = await Promise.all(
      engines.map(async (storage) => {
        const merchant = await storage.createMerchant({ name: 'Bytes', sku_pattern: null, owner_emails: [], created_at: T0 });
        const store = await storage.upsertStore(merchant.id, 'pl', {
          name: 'PL',
          locale: 'pl-PL',
          currency: 'PLN',
          is_default: true,
          active: true,
          exclude_out_of_stock: false,
        });
        await storage.upsertPublished(store.id, PAYLOADS);
        const page = await storage.publishedPage(store.id, 1, 12);
        return {
          page: Buffer.from(page.bytes),
          digests: Buffer.from(page.digests),
          ids: Buffer.from((await storage.publishedPayloadsByIds(store.id, [1, 2, 7, 12])).bytes),
          prices: Buffer.from(await storage.publishedPricesByIds(store.id, [1, 2, 7, 12])),
        };
      }),
    );
    const [sqlite, postgres] = answers as [(typeof answers)[0], (typeof answers)[0]];
    expect(postgres.page.equals(sqlite.page)).toBe(true);
    expect(postgres.page.toString('utf8')).toBe(PAYLOADS.map((p) => p.payload).join(','));
    expect(postgres.digests.equals(sqlite.digests)).toBe(true);
    expect(postgres.ids.equals(sqlite.ids)).toBe(true);
    expect(postgres.prices.equals(sqlite.prices)).toBe(true);
    // The stored number literals are kept (jsonb would turn 12.50 into 12.50 but 9.990 / 1e3 forms into others).
    expect(postgres.prices.toString('utf8')).toContain('"amount":12.50,');
    expect(postgres.prices.toString('utf8')).toContain('"amount":9.990,');
    expect(
      postgres.prices
        .toString('utf8')
        .startsWith('{"id":1,"sku":"SKU-1","ean":"5901234123457","prices":[{"customer_group":null,"amount":12.50'),
    ).toBe(true);
  });
});

describe('prepared statements', () => {
  it("prepare a page read again when another process's migration changes a column it returns", async () => {
    const url = await freshDatabase();
    // One connection: the statement is prepared on it before the change and runs on it after.
    const storage = openPostgresStorage(url, { poolSize: 1 });
    opened.push(storage);
    const merchant = await storage.createMerchant({ name: 'M', sku_pattern: null, owner_emails: [], created_at: T0 });
    const store = await storage.upsertStore(merchant.id, 'de', {
      name: 'DE',
      locale: 'de-DE',
      currency: 'EUR',
      is_default: true,
      active: true,
      exclude_out_of_stock: false,
    });
    await storage.upsertPublished(store.id, [{ productId: 1, payload: '{"id":1}', priceHash: 'p', contentHash: 'c' }]);
    const expected = { storeId: store.id, catalogVersion: store.catalog_version, range: [1, 1] as [number, number] };
    const read = async () => {
      const { store: found, page } = await storage.publishedPageOfStore(merchant.id, 'de', expected);
      return [found?.name, Buffer.from(page!.bytes).toString()];
    };
    expect(await read()).toEqual(['DE', '{"id":1}']);
    const other = new pg.Client(url);
    await other.connect();
    try {
      // A new column is no change of the statement's result (its columns are listed) ...
      await other.query('ALTER TABLE stores ADD COLUMN added_later text');
      expect(await read()).toEqual(['DE', '{"id":1}']);
      // ... a listed column's new type is: PostgreSQL refuses the cached plan, and it is prepared anew.
      await other.query('ALTER TABLE stores ALTER COLUMN name TYPE varchar(200)');
      expect(await read()).toEqual(['DE', '{"id":1}']);
      expect(await read()).toEqual(['DE', '{"id":1}']);
    } finally {
      await other.end();
    }
  });
});

describe('transactions and snapshots', () => {
  it('roll back everything done through tx when the callback fails', async () => {
    const storage = await openFresh();
    await expect(
      storage.transaction(async (tx) => {
        await tx.createMerchant({ name: 'Gone', sku_pattern: null, owner_emails: [], created_at: T0 });
        throw new Error('fails after a write');
      }),
    ).rejects.toThrow('fails after a write');
    expect(await storage.countMerchants()).toBe(0);
  });

  it('give a snapshot one view of the committed data while others write', async () => {
    const storage = await openFresh();
    await storage.createMerchant({ name: 'First', sku_pattern: null, owner_emails: [], created_at: T0 });
    const seen = await storage.snapshot(async (reader) => {
      const before = await reader.countMerchants();
      await storage.createMerchant({ name: 'Second', sku_pattern: null, owner_emails: [], created_at: T0 });
      return [before, await reader.countMerchants()];
    });
    expect(seen).toEqual([1, 1]);
    expect(await storage.countMerchants()).toBe(2);
  });

  it('run a transaction again when PostgreSQL ends it as a deadlock victim', async () => {
    const storage = await openFresh();
    const a = await storage.createMerchant({ name: 'A', sku_pattern: null, owner_emails: [], created_at: T0 });
    const b = await storage.createMerchant({ name: 'B', sku_pattern: null, owner_emails: [], created_at: T0 });
    let arrived = 0;
    const bothLocked = async () => {
      arrived++;
      while (arrived < 2) await sleep(5);
    };
    let calls = 0;
    // Each locks one merchant row, then wants the other's: one of them is chosen as the victim.
    const crossing = (first: number, second: number) =>
      storage.transaction(async (tx) => {
        calls++;
        await tx.updateMerchant(first, { sku_pattern: `by ${first}` });
        await bothLocked();
        await tx.updateMerchant(second, { sku_pattern: `by ${first}` });
      });
    await Promise.all([crossing(a.id, b.id), crossing(b.id, a.id)]);
    expect(calls).toBe(3);
  });

  it('run a write called on the storage itself as its own transaction', async () => {
    const storage = await openFresh();
    const merchant = await storage.createMerchant({ name: 'Own', sku_pattern: null, owner_emails: [], created_at: T0 });
    const store = await storage.upsertStore(merchant.id, 'pl', {
      name: 'PL',
      locale: 'pl-PL',
      currency: 'PLN',
      is_default: true,
      active: true,
      exclude_out_of_stock: false,
    });
    await storage.recordChanges(merchant.id, [{ storeId: store.id, productId: 1, changeType: 'price' }], new Date(T0));
    expect(await storage.changesAfter(store.id, { at: '', id: 0 }, 10)).toEqual([
      { id: 1, product_id: 1, change_type: 'price', created_at: T0 },
    ]);
  });

  it('count what /metrics reports on a fresh database', async () => {
    const storage = await openFresh();
    expect(await storage.operationalCounts()).toEqual({
      endpoints: { active: 0, paused: 0, disabled: 0 },
      outboxDepth: 0,
      waitingDeliveries: { pending: 0, failed: 0 },
      oldestWaitingAt: null,
      images: { pending: 0, mirrored: 0, dead: 0 },
      imageOrigins: { failing: 0, down: 0 },
      imagesWaitingOnDownOrigins: 0,
    });
  });
});

describe('the change sequencer', () => {
  async function merchantWithStore(storage: CatalogStorage, name: string) {
    const merchant = await storage.createMerchant({ name, sku_pattern: null, owner_emails: [], created_at: T0 });
    const store = await storage.upsertStore(merchant.id, 'pl', {
      name,
      locale: 'pl-PL',
      currency: 'PLN',
      is_default: true,
      active: true,
      exclude_out_of_stock: false,
    });
    return { merchantId: merchant.id, storeId: store.id };
  }

  it('gives each merchant its own ids 1, 2, 3 … and a created_at that never goes back', async () => {
    const storage = await openFresh();
    const acme = await merchantWithStore(storage, 'Acme');
    const other = await merchantWithStore(storage, 'Other');
    const record = (who: typeof acme, count: number, at: string) =>
      storage.transaction((tx) =>
        tx.recordChanges(
          who.merchantId,
          Array.from({ length: count }, (_, i) => ({ storeId: who.storeId, productId: 100 + i, changeType: 'content' as const })),
          new Date(at),
        ),
      );
    await record(acme, 3, '2026-11-26T10:00:00.700Z');
    await record(other, 1, '2026-11-26T10:00:01.000Z');
    await record(acme, 1, '2026-11-26T09:59:58.000Z'); // the clock stepped back
    await record(acme, 2, '2026-11-26T10:00:05.999Z');
    await storage.transaction(async (tx) => tx.recordChanges(acme.merchantId, [], new Date()));
    const feed = await storage.changesAfter(acme.storeId, { at: '', id: 0 }, 100);
    expect(feed.map((c) => [c.id, c.created_at])).toEqual([
      [1, '2026-11-26T10:00:00Z'],
      [2, '2026-11-26T10:00:00Z'],
      [3, '2026-11-26T10:00:00Z'],
      [4, '2026-11-26T10:00:00Z'],
      [5, '2026-11-26T10:00:05Z'],
      [6, '2026-11-26T10:00:05Z'],
    ]);
    expect(feed[0]).toEqual({ id: 1, product_id: 100, change_type: 'content', created_at: '2026-11-26T10:00:00Z' });
    expect(await storage.changesAfter(other.storeId, { at: '', id: 0 }, 100)).toEqual([
      { id: 1, product_id: 100, change_type: 'content', created_at: '2026-11-26T10:00:01Z' },
    ]);
    expect((await storage.changesAfter(acme.storeId, { at: '2026-11-26T10:00:00Z', id: 2 }, 2)).map((c) => c.id)).toEqual([3, 4]);
    // A rolled-back write hands out nothing: the next one goes on from 7.
    await expect(
      storage.transaction(async (tx) => {
        await tx.recordChanges(
          acme.merchantId,
          [{ storeId: acme.storeId, productId: 1, changeType: 'price' }],
          new Date('2026-11-26T10:00:06Z'),
        );
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    await record(acme, 1, '2026-11-26T10:00:06Z');
    expect((await storage.changesAfter(acme.storeId, { at: '2026-11-26T10:00:05Z', id: 6 }, 10)).map((c) => c.id)).toEqual([7]);
  });

  it("prunes the oldest changes and moves each store's horizon to the newest pruned position", async () => {
    const storage = await openFresh();
    const acme = await merchantWithStore(storage, 'Acme');
    const de = await storage.upsertStore(acme.merchantId, 'de', {
      name: 'DE',
      locale: 'de-DE',
      currency: 'EUR',
      is_default: false,
      active: true,
      exclude_out_of_stock: false,
    });
    const other = await merchantWithStore(storage, 'Other');
    await storage.recordChanges(
      acme.merchantId,
      [
        { storeId: acme.storeId, productId: 1, changeType: 'price' },
        { storeId: de.id, productId: 1, changeType: 'price' },
        { storeId: acme.storeId, productId: 2, changeType: 'content' },
      ],
      new Date('2026-10-01T00:00:00Z'),
    );
    await storage.recordChanges(
      other.merchantId,
      [{ storeId: other.storeId, productId: 5, changeType: 'removed' }],
      new Date('2026-10-01T00:00:00Z'),
    );
    await storage.recordChanges(
      acme.merchantId,
      [{ storeId: acme.storeId, productId: 3, changeType: 'price' }],
      new Date('2026-10-02T00:00:00Z'),
    );
    await storage.recordChanges(
      acme.merchantId,
      [{ storeId: acme.storeId, productId: 4, changeType: 'price' }],
      new Date('2026-11-20T00:00:00Z'),
    );
    expect(await storage.pruneChangesBefore('2026-10-15T00:00:00Z', 2)).toBe(2);
    expect(await storage.changeHorizon(acme.storeId)).toEqual({ at: '2026-10-01T00:00:00Z', id: 1 });
    expect(await storage.changeHorizon(de.id)).toEqual({ at: '2026-10-01T00:00:00Z', id: 2 });
    expect(await storage.changeHorizon(other.storeId)).toBeUndefined();
    expect(await storage.pruneChangesBefore('2026-10-15T00:00:00Z', 100)).toBe(3);
    expect(await storage.pruneChangesBefore('2026-10-15T00:00:00Z', 100)).toBe(0);
    expect(await storage.changeHorizon(acme.storeId)).toEqual({ at: '2026-10-02T00:00:00Z', id: 4 });
    expect(await storage.changeHorizon(other.storeId)).toEqual({ at: '2026-10-01T00:00:00Z', id: 1 });
    expect((await storage.changesAfter(acme.storeId, { at: '', id: 0 }, 10)).map((c) => c.id)).toEqual([5]);
  });

  it('keeps ids distinct, gap-free and in commit order under concurrent writers: a poller sees every change once, in order', async () => {
    const storage = await openFresh({ poolSize: 12 });
    const { merchantId, storeId } = await merchantWithStore(storage, 'Busy');
    // Every change in one second: positions differ by id alone, the hard case for a feed cursor.
    const now = new Date('2026-11-26T10:00:00.250Z');
    const writers = 8;
    const perWriter = 15;
    let recorded = 0;
    let writing = true;
    const write = async (writer: number) => {
      for (let i = 0; i < perWriter; i++) {
        const count = 1 + ((writer + i) % 3);
        await storage.transaction(async (tx) => {
          await sleep(Math.random() * 3);
          await tx.recordChanges(
            merchantId,
            Array.from({ length: count }, (_, k) => ({ storeId, productId: writer * 1000 + i * 10 + k, changeType: 'price' as const })),
            now,
          );
          // Holding the transaction open after taking positions: a later writer must not commit a
          // smaller position after the poller has moved past it.
          await sleep(Math.random() * 3);
        });
        recorded += count;
      }
    };
    const seen: number[] = [];
    const poll = async () => {
      let cursor = { at: '', id: 0 };
      for (;;) {
        const stillWriting = writing;
        const window = await storage.changesAfter(storeId, cursor, 7);
        for (const change of window) seen.push(change.id);
        if (window.length > 0) cursor = { at: window.at(-1)!.created_at, id: window.at(-1)!.id };
        else if (!stillWriting) return;
        else await sleep(1);
      }
    };
    const poller = poll();
    await Promise.all(Array.from({ length: writers }, (_, w) => write(w)));
    writing = false;
    await poller;
    expect(recorded).toBeGreaterThan(writers * perWriter);
    expect(seen).toEqual(Array.from({ length: recorded }, (_, i) => i + 1));
  });
});

describe('the command line on PostgreSQL', () => {
  const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

  it('runs every command on the database CPS_DATABASE_URL names, and explains pg_dump for backup', async () => {
    const url = await freshDatabase();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-pg-cli-'));
    const cli = async (...args: string[]) => {
      try {
        const { stdout } = await promisify(execFile)(process.execPath, nodeArguments('src/cli.ts', args), {
          cwd: ROOT,
          env: { ...process.env, CPS_DATABASE_URL: url, CPS_DB_PATH: path.join(dir, 'unused.db'), CPS_LOG_LEVEL: 'warn' },
        });
        return { code: 0, stdout, stderr: '' };
      } catch (error) {
        const failed = error as { code: number; stdout: string; stderr: string };
        return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
      }
    };
    try {
      const demo = await cli('demo', '--products', '5', '--json');
      expect(demo.code).toBe(0);
      expect(JSON.parse(demo.stdout)).toMatchObject({ merchant_id: 1, products: 5 });
      const [key, invitation, endpoints, backup] = await Promise.all([
        cli('keys', 'create', '--merchant', '1', '--json'),
        cli('users', 'invite', '--merchant', '1', '--email', 'owner@example.com', '--json'),
        cli('webhooks', 'list', '--merchant', '1', '--json'),
        cli('backup', '--to', path.join(dir, 'copy.db')),
      ]);
      expect(JSON.parse(key.stdout)).toMatchObject({ merchant_id: 1, name: 'cli' });
      expect(JSON.parse(invitation.stdout)).toMatchObject({ email: 'owner@example.com', role: 'member' });
      expect(JSON.parse(endpoints.stdout)).toEqual([]);
      expect(backup.code).toBe(2);
      expect(backup.stderr).toMatch(/runs on PostgreSQL[\s\S]*pg_dump/);
      // Everything went to PostgreSQL: no SQLite file was made.
      expect(fs.existsSync(path.join(dir, 'unused.db'))).toBe(false);
      const storage = openPostgresStorage(url);
      opened.push(storage);
      expect((await storage.listApiKeys(1)).length).toBe(2);
      expect((await storage.publishedProductIds((await storage.findStore(1, 'pl'))!.id)).length).toBe(5);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
