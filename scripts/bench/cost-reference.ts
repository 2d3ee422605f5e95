// The references of `npm run bench:cost`: each unit of background work done in this process with
// nothing but its inherent work, on a plain database of its own (an SQLite file through
// better-sqlite3, WAL and synchronous=NORMAL as the service opens its file; or a database on the
// same throwaway PostgreSQL server through a `pg` pool of 4), to measure the service's CPU per unit
// against:
//   import   - parse the line (JSON.parse, the source normalised as the service keeps it), resolve it
//              for each active store with the service's own `resolveProduct` (the merchant's context
//              loaded by the service's own publisher), compare the payload hashes with the stored
//              ones, upsert the source (when its text changed) and the changed payloads, record a
//              change row per changed payload; chunks of 1,000 lines, one transaction each, with a
//              read of the chunk's sources and of its stored hashes (PostgreSQL: batched statements);
//   image    - fetch the image over loopback (undici, kept-alive connections), SHA-256 of its bytes,
//              write the file, one UPDATE of its row; 4 at once (CPS_IMAGE_CONCURRENCY's default);
//   delivery - a delivery's JSON body (100 product ids, the most one carries), signed with the
//              service's own signedHeaders, POSTed to the receiver and its answer read, then two row
//              writes (the delivery and its attempt); 4 at once (CPS_WEBHOOK_ENDPOINT_CONCURRENCY's default).
// What it leaves out is what the service adds around the inherent work: validation against the
// schema, the image rows of new images, the outbox rows of endpoints, leases and claims, retries,
// health, metrics and logs. The bench measures the CPU around each run (process.cpuUsage(), plus the
// database server's processes on PostgreSQL).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { Agent, request } from 'undici';
import type { MerchantContext, ProductRecord, ProductSourceDocument } from '../../src/catalog/model.js';
import { normalizeSource } from '../../src/catalog/product-sources.js';
import { CatalogPublisher } from '../../src/catalog/publish.js';
import { resolveProduct } from '../../src/catalog/resolve.js';
import { loadConfig } from '../../src/config.js';
import { openStorage } from '../../src/service.js';
import { newWebhookId } from '../../src/storage/delivery-ids.js';
import { scopeToMerchant } from '../../src/storage/merchant-scope.js';
import { newSigningSecret, signedHeaders } from '../../src/webhooks/signing.js';
import { wholeSecondIso } from '../../src/shared/time.js';

/** The merchant's context as the service's publisher loads it for a publish, read from the service's database. */
export async function merchantContext(database: string, merchantId: number): Promise<MerchantContext> {
  const onPostgres = /^postgres(ql)?:\/\//.test(database);
  const storage = openStorage(
    loadConfig({ CPS_LOG_LEVEL: 'silent' }, onPostgres ? { databaseUrl: database } : { databasePath: database, databaseUrl: null }),
  );
  try {
    return await new CatalogPublisher(() => new Date()).loadContext(scopeToMerchant(storage, merchantId));
  } finally {
    await storage.close();
  }
}

interface StoredHashes {
  price: string;
  content: string;
}
interface PayloadRow {
  store: number;
  product: number;
  payload: string;
  price: string;
  content: string;
  kind: 'price' | 'content';
}

/** The reference's own tables and the few statements each unit needs, on one engine. */
export interface ReferenceDb {
  transaction(fn: () => Promise<void>): Promise<void>;
  /** The stored sources of these refs: id and hash of their text. */
  sourcesByRef(refs: string[]): Promise<Map<string, { id: number; hash: string }>>;
  /** Inserts or updates these sources; their ids by ref. */
  upsertSources(rows: { ref: string; text: string; hash: string }[]): Promise<Map<string, number>>;
  /** The stored payload hashes of these products, by `store:product`. */
  hashesOf(productIds: number[]): Promise<Map<string, StoredHashes>>;
  /** Upserts the payloads and records a change row for each. */
  writePayloads(rows: PayloadRow[], at: string): Promise<void>;
  /** Image rows for these URLs (pending); their ids. */
  addImages(urls: string[]): Promise<number[]>;
  markMirrored(id: number, key: string, at: string): Promise<void>;
  /** The two row writes of a delivery made: the delivery and its attempt. */
  recordDelivery(endpoint: number, productIds: string, statusCode: number, at: string): Promise<void>;
  close(): Promise<void>;
}

const SCHEMA = (serial: string) => `
CREATE TABLE ref_sources (id ${serial} PRIMARY KEY, ref TEXT NOT NULL UNIQUE, source TEXT NOT NULL, hash TEXT NOT NULL);
CREATE TABLE ref_published (product_id INTEGER NOT NULL, store_id INTEGER NOT NULL, payload TEXT NOT NULL,
  price_hash TEXT NOT NULL, content_hash TEXT NOT NULL, PRIMARY KEY (product_id, store_id));
CREATE TABLE ref_changes (id ${serial} PRIMARY KEY, store_id INTEGER NOT NULL, product_id INTEGER NOT NULL, kind TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE ref_images (id ${serial} PRIMARY KEY, url TEXT NOT NULL, state TEXT NOT NULL, media_key TEXT, mirrored_at TEXT);
CREATE TABLE ref_deliveries (id ${serial} PRIMARY KEY, endpoint_id INTEGER NOT NULL, product_ids TEXT NOT NULL, status TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE ref_attempts (id ${serial} PRIMARY KEY, delivery_id INTEGER NOT NULL, status_code INTEGER, at TEXT NOT NULL);
`;

export function sqliteReference(file: string): ReferenceDb {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(SCHEMA('INTEGER'));
  const sources = db.prepare('SELECT id, ref, hash FROM ref_sources WHERE ref IN (SELECT value FROM json_each(?))');
  const upsert = db
    .prepare(
      'INSERT INTO ref_sources (ref, source, hash) VALUES (?, ?, ?) ON CONFLICT (ref) DO UPDATE SET source = excluded.source, hash = excluded.hash RETURNING id',
    )
    .pluck();
  const hashes = db.prepare(
    'SELECT product_id, store_id, price_hash, content_hash FROM ref_published WHERE product_id IN (SELECT value FROM json_each(?))',
  );
  const payload = db.prepare(
    'INSERT INTO ref_published VALUES (?, ?, ?, ?, ?) ON CONFLICT (product_id, store_id) DO UPDATE SET payload = excluded.payload, price_hash = excluded.price_hash, content_hash = excluded.content_hash',
  );
  const change = db.prepare('INSERT INTO ref_changes (store_id, product_id, kind, at) VALUES (?, ?, ?, ?)');
  const image = db.prepare("INSERT INTO ref_images (url, state) VALUES (?, 'pending') RETURNING id").pluck();
  const mirrored = db.prepare("UPDATE ref_images SET state = 'mirrored', media_key = ?, mirrored_at = ? WHERE id = ?");
  const delivery = db
    .prepare("INSERT INTO ref_deliveries (endpoint_id, product_ids, status, at) VALUES (?, ?, 'succeeded', ?) RETURNING id")
    .pluck();
  const attempt = db.prepare('INSERT INTO ref_attempts (delivery_id, status_code, at) VALUES (?, ?, ?)');
  return {
    async transaction(fn) {
      db.exec('BEGIN IMMEDIATE');
      try {
        await fn();
        db.exec('COMMIT');
      } catch (error) {
        db.exec('ROLLBACK');
        throw error;
      }
    },
    async sourcesByRef(refs) {
      const rows = sources.all(JSON.stringify(refs)) as { id: number; ref: string; hash: string }[];
      return new Map(rows.map((r) => [r.ref, { id: r.id, hash: r.hash }]));
    },
    async upsertSources(rows) {
      return new Map(rows.map((r) => [r.ref, upsert.get(r.ref, r.text, r.hash) as number]));
    },
    async hashesOf(productIds) {
      const rows = hashes.all(JSON.stringify(productIds)) as {
        product_id: number;
        store_id: number;
        price_hash: string;
        content_hash: string;
      }[];
      return new Map(rows.map((r) => [`${r.store_id}:${r.product_id}`, { price: r.price_hash, content: r.content_hash }]));
    },
    async writePayloads(rows, at) {
      for (const r of rows) {
        payload.run(r.product, r.store, r.payload, r.price, r.content);
        change.run(r.store, r.product, r.kind, at);
      }
    },
    async addImages(urls) {
      return db.transaction(() => urls.map((url) => image.get(url) as number))();
    },
    async markMirrored(id, key, at) {
      mirrored.run(key, at, id);
    },
    async recordDelivery(endpoint, productIds, statusCode, at) {
      const id = delivery.get(endpoint, productIds, at) as number;
      attempt.run(id, statusCode, at);
    },
    async close() {
      db.close();
    },
  };
}

export async function postgresReference(url: string): Promise<ReferenceDb> {
  // A pool of 4 (the images and deliveries run 4 at once); a transaction holds one of its clients.
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  await pool.query(SCHEMA('bigint GENERATED ALWAYS AS IDENTITY'));
  let inTransaction: pg.PoolClient | null = null;
  const q = async <R extends pg.QueryResultRow>(text: string, values: unknown[]) =>
    (await (inTransaction ?? pool).query<R>({ text, values })).rows;
  // One statement a call, its rows passed as arrays (unnest): the round trips a batch costs, not one a row.
  return {
    async transaction(fn) {
      const client = await pool.connect();
      inTransaction = client;
      try {
        await client.query('BEGIN');
        await fn();
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      } finally {
        inTransaction = null;
        client.release();
      }
    },
    async sourcesByRef(refs) {
      const rows = await q<{ id: string; ref: string; hash: string }>('SELECT id, ref, hash FROM ref_sources WHERE ref = ANY($1)', [refs]);
      return new Map(rows.map((r) => [r.ref, { id: Number(r.id), hash: r.hash }]));
    },
    async upsertSources(rows) {
      if (rows.length === 0) return new Map();
      const ids = await q<{ id: string; ref: string }>(
        `INSERT INTO ref_sources (ref, source, hash) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
         ON CONFLICT (ref) DO UPDATE SET source = excluded.source, hash = excluded.hash RETURNING id, ref`,
        [rows.map((r) => r.ref), rows.map((r) => r.text), rows.map((r) => r.hash)],
      );
      return new Map(ids.map((r) => [r.ref, Number(r.id)]));
    },
    async hashesOf(productIds) {
      const rows = await q<{ product_id: number; store_id: number; price_hash: string; content_hash: string }>(
        'SELECT product_id, store_id, price_hash, content_hash FROM ref_published WHERE product_id = ANY($1)',
        [productIds],
      );
      return new Map(rows.map((r) => [`${r.store_id}:${r.product_id}`, { price: r.price_hash, content: r.content_hash }]));
    },
    async writePayloads(rows, at) {
      if (rows.length === 0) return;
      const [products, stores] = [rows.map((r) => r.product), rows.map((r) => r.store)];
      await q(
        `INSERT INTO ref_published SELECT * FROM unnest($1::int[], $2::int[], $3::text[], $4::text[], $5::text[])
         ON CONFLICT (product_id, store_id) DO UPDATE SET payload = excluded.payload, price_hash = excluded.price_hash, content_hash = excluded.content_hash`,
        [products, stores, rows.map((r) => r.payload), rows.map((r) => r.price), rows.map((r) => r.content)],
      );
      await q(
        `INSERT INTO ref_changes (store_id, product_id, kind, at) SELECT s, p, k, $4 FROM unnest($1::int[], $2::int[], $3::text[]) AS u(s, p, k)`,
        [stores, products, rows.map((r) => r.kind), at],
      );
    },
    async addImages(urls) {
      const rows = await q<{ id: string }>(
        "INSERT INTO ref_images (url, state) SELECT u, 'pending' FROM unnest($1::text[]) AS u RETURNING id",
        [urls],
      );
      return rows.map((r) => Number(r.id));
    },
    async markMirrored(id, key, at) {
      await q("UPDATE ref_images SET state = 'mirrored', media_key = $1, mirrored_at = $2 WHERE id = $3", [key, at, id]);
    },
    async recordDelivery(endpoint, productIds, statusCode, at) {
      const [{ id }] = (await q<{ id: string }>(
        "INSERT INTO ref_deliveries (endpoint_id, product_ids, status, at) VALUES ($1, $2, 'succeeded', $3) RETURNING id",
        [endpoint, productIds, at],
      )) as [{ id: string }];
      await q('INSERT INTO ref_attempts (delivery_id, status_code, at) VALUES ($1, $2, $3)', [id, statusCode, at]);
    },
    close: () => pool.end(),
  };
}

const sha1 = (text: string) => createHash('sha1').update(text).digest('base64url');

/** An NDJSON import of upsert_product lines, the reference way; the changes it recorded. */
export async function referenceImport(db: ReferenceDb, context: MerchantContext, body: string, chunkSize = 1000): Promise<number> {
  const stores = context.stores.filter((s) => s.active);
  const noMirrors = new Map();
  const lines = body.split('\n').filter((line) => line.trim());
  let changes = 0;
  for (let i = 0; i < lines.length; i += chunkSize) {
    const parsed = lines.slice(i, i + chunkSize).map((line) => {
      const { product } = JSON.parse(line) as { product: { ref: string } & Record<string, unknown> };
      const { ref, ...input } = product;
      const source: ProductSourceDocument = normalizeSource(input);
      const text = JSON.stringify(source);
      return { ref, source, text, hash: sha1(text) };
    });
    await db.transaction(async () => {
      const known = await db.sourcesByRef(parsed.map((p) => p.ref));
      const ids = await db.upsertSources(parsed.filter((p) => known.get(p.ref)?.hash !== p.hash));
      const products: ProductRecord[] = parsed.map((p) => ({ id: ids.get(p.ref) ?? known.get(p.ref)!.id, ref: p.ref, source: p.source }));
      const stored = await db.hashesOf(products.map((p) => p.id));
      const rows: PayloadRow[] = [];
      for (const product of products) {
        for (const store of stores) {
          const resolved = resolveProduct(product, store, context, noMirrors);
          const before = stored.get(`${store.id}:${product.id}`);
          if (before?.price === resolved.priceHash && before.content === resolved.contentHash) continue;
          rows.push({
            store: store.id,
            product: product.id,
            payload: resolved.payload,
            price: resolved.priceHash,
            content: resolved.contentHash,
            kind: before && before.price !== resolved.priceHash ? 'price' : 'content',
          });
        }
      }
      await db.writePayloads(rows, wholeSecondIso(new Date()));
      changes += rows.length;
    });
  }
  return changes;
}

/** Runs `work(i)` for i in 0..count-1, `concurrency` at once. */
async function inParallel(count: number, concurrency: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

/** Mirrors the prepared images the reference way into `mediaDir`; the images mirrored. */
export async function referenceImages(
  db: ReferenceDb,
  images: { id: number; url: string }[],
  mediaDir: string,
  concurrency = 4,
): Promise<number> {
  fs.mkdirSync(mediaDir, { recursive: true });
  const dispatcher = new Agent({ connections: concurrency });
  let mirrored = 0;
  try {
    await inParallel(images.length, concurrency, async (i) => {
      const { id, url } = images[i]!;
      const response = await request(url, { dispatcher });
      const bytes = Buffer.from(await response.body.arrayBuffer());
      if (response.statusCode !== 200) return;
      const key = `${createHash('sha256').update(bytes).digest('hex')}.jpg`;
      await fs.promises.writeFile(path.join(mediaDir, key), bytes);
      await db.markMirrored(id, key, new Date().toISOString());
      mirrored++;
    });
  } finally {
    await dispatcher.close();
  }
  return mirrored;
}

/** `count` signed deliveries of 100 product ids POSTed to `url` the reference way; the 2xx answers. */
export async function referenceDeliveries(db: ReferenceDb, url: string, count: number, concurrency = 4): Promise<number> {
  const dispatcher = new Agent({ connections: concurrency });
  const secret = newSigningSecret();
  let delivered = 0;
  try {
    await inParallel(count, concurrency, async (i) => {
      const productIds = Array.from({ length: 100 }, (_, k) => 100_000 + i * 100 + k);
      const now = new Date();
      const body = JSON.stringify({ event: 'price', store_id: 1, product_ids: productIds, occurred_at: wholeSecondIso(now) });
      const headers = signedHeaders({ signing: secret, webhookId: newWebhookId() }, body, now);
      const response = await request(url, { method: 'POST', headers, body, dispatcher });
      await response.body.text();
      if (response.statusCode >= 200 && response.statusCode < 300) delivered++;
      await db.recordDelivery(1, JSON.stringify(productIds), response.statusCode, now.toISOString());
    });
  } finally {
    await dispatcher.close();
  }
  return delivered;
}
