// A merchant's listed images per state (imageStateCounts, kept counts) after bulk writes of product
// sources: chunks that add many new images at once, images shared by several products, dropped by
// some, unlisted by all, state changes, products deleted. PostgreSQL counts inserted and deleted
// image rows once per statement (migration 24), so every image of a chunk must be counted; on
// PostgreSQL the kept counts also equal a count of the rows after plain INSERT and DELETE statements,
// and after transitions committed from several connections at once, whose count deltas wait for
// the transaction that holds the merchant's fold lock (migration 48).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import type { ProductSourceDocument } from '../../src/catalog/model.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';

const AT = '2026-11-26T08:00:00.000Z';
const url = (n: number) => `https://cdn.example/${n}.jpg`;

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;
let merchantId: number;
let other: number;

const source = (images: number[]): ProductSourceDocument => ({
  eans: [],
  manufacturer: null,
  content: { de: { title: 'Zelt', description: null } },
  images: images.map((n) => ({ url: url(n) })),
  offers: [],
  own_stock: null,
  supplier_attributes: [],
  overrides: {},
  excluded_stores: [],
});

/** What the test wrote: each product's images (by ref), and the images whose state it changed. */
const products = new Map<string, number[]>();
const states = new Map<number, 'mirrored' | 'dead'>();
const ids = new Map<string, number>();

async function upsertChunk(chunk: [string, number[]][]): Promise<void> {
  const written = await storage.upsertProductSources(
    merchantId,
    chunk.map(([ref, images]) => ({ ref, source: source(images) })),
    AT,
  );
  chunk.forEach(([ref, images], i) => {
    products.set(ref, images);
    ids.set(ref, written[i]!.id);
  });
}

/** The listed images per state, counted here: an image is listed while a product lists it. */
function expected() {
  const listed = new Set([...products.values()].flat());
  const counts = { pending: 0, mirrored: 0, dead: 0 };
  for (const n of listed) counts[states.get(n) ?? 'pending']++;
  return counts;
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-image-counts-'));
  database = await createTestDatabase(dir);
  storage = await database.open();
  merchantId = (await storage.createMerchant({ name: 'Images', sku_pattern: null, owner_emails: [], created_at: AT })).id;
  other = (await storage.createMerchant({ name: 'Other', sku_pattern: null, owner_emails: [], created_at: AT })).id;
});

afterAll(async () => {
  await storage?.close();
  await database?.drop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('kept image counts after bulk writes of product sources', () => {
  it('counts every new image of a chunk once, however many products of the chunk list it', async () => {
    await upsertChunk(Array.from({ length: 100 }, (_, i) => [`P-${i}`, [i, i + 1, 1000]]));
    await storage.upsertProductSource(other, 'O-1', source([1, 2]), AT);
    expect(await storage.imageStateCounts(merchantId)).toEqual(expected());
    expect(expected().pending).toBe(102);
    expect(await storage.imageStateCounts(other)).toEqual({ pending: 2, mirrored: 0, dead: 0 });
  });

  it('counts images whose state changed, then a chunk that drops some, unlists others and adds new ones', async () => {
    for (const n of [5, 6, 1000]) {
      await storage.updateImageMirror(merchantId, url(n), {
        state: 'mirrored',
        mirrored_url: `https://media.example/${n}.jpg`,
        next_attempt_at: null,
        updated_at: AT,
      });
      states.set(n, 'mirrored');
    }
    await storage.updateImageMirror(merchantId, url(7), { state: 'dead', last_error: 'http_404', next_attempt_at: null, updated_at: AT });
    states.set(7, 'dead');
    expect(await storage.imageStateCounts(merchantId)).toEqual(expected());
    // P-0..P-49 now list only new images (0..50 and 1000 stay listed by the others where they do).
    await upsertChunk(Array.from({ length: 50 }, (_, i) => [`P-${i}`, [2000 + i]]));
    expect(await storage.imageStateCounts(merchantId)).toEqual(expected());
    // A chunk of new products listing images already known, unlisted ones among them.
    await upsertChunk(Array.from({ length: 30 }, (_, i) => [`Q-${i}`, [i, 2000 + i, 3000]]));
    expect(await storage.imageStateCounts(merchantId)).toEqual(expected());
  });

  it('counts products deleted one by one and in a transaction with other writes', async () => {
    for (const ref of ['P-60', 'P-61']) {
      await storage.deleteProduct(merchantId, ids.get(ref)!);
      products.delete(ref);
    }
    expect(await storage.imageStateCounts(merchantId)).toEqual(expected());
    await storage.transaction(async (tx) => {
      for (const ref of ['Q-1', 'Q-2']) await tx.deleteProduct(merchantId, ids.get(ref)!);
      await tx.upsertProductSources(merchantId, [{ ref: 'R-1', source: source([4000, 4001, 5]) }], AT);
    });
    products.delete('Q-1');
    products.delete('Q-2');
    products.set('R-1', [4000, 4001, 5]);
    expect(await storage.imageStateCounts(merchantId)).toEqual(expected());
  });

  it.skipIf(TEST_ENGINE !== 'postgres' || onPglite())(
    'PostgreSQL: the kept counts equal a count of the rows after plain INSERT and DELETE statements of many rows',
    async () => {
      const client = new pg.Client(database.location);
      await client.connect();
      try {
        const recount = async () =>
          (
            await client.query(`SELECT merchant_id::integer AS merchant_id, state, count(*)::integer AS n FROM image_mirrors
        WHERE listed > 0 GROUP BY 1, 2 ORDER BY 1, 2`)
          ).rows;
        const kept = async () =>
          (
            await client.query(
              `SELECT merchant_id::integer AS merchant_id, state, sum(n)::integer AS n FROM (SELECT merchant_id, state, n FROM image_state_counts
              UNION ALL SELECT merchant_id, state, n FROM image_state_count_deltas) AS kept GROUP BY 1, 2 HAVING sum(n) <> 0 ORDER BY 1, 2`,
            )
          ).rows;
        expect(await kept()).toEqual(await recount());
        await client.query(
          `INSERT INTO image_mirrors (merchant_id, url, origin, state, updated_at, listed)
        SELECT CASE WHEN i % 2 = 0 THEN $1::bigint ELSE $2::bigint END, 'https://bulk.example/' || i, 'https://bulk.example',
          (ARRAY['pending', 'mirrored', 'dead'])[1 + i % 3], $3, i % 4 FROM generate_series(1, 600) AS i`,
          [merchantId, other, AT],
        );
        expect(await kept()).toEqual(await recount());
        await client.query(
          "DELETE FROM image_mirrors WHERE url LIKE 'https://bulk.example/%' AND (url LIKE '%1' OR url LIKE '%2' OR url LIKE '%5')",
        );
        expect(await kept()).toEqual(await recount());
        await client.query("DELETE FROM image_mirrors WHERE merchant_id = $1 AND state = 'pending'", [other]);
        expect(await kept()).toEqual(await recount());
      } finally {
        await client.end();
      }
    },
  );

  it.skipIf(TEST_ENGINE !== 'postgres' || onPglite())(
    'PostgreSQL: counts a transition once it commits, and two open transitions of one merchant never wait for each other',
    async () => {
      const first = new pg.Client(database.location);
      const second = new pg.Client(database.location);
      await Promise.all([first.connect(), second.connect()]);
      try {
        await storage.transaction(async (tx) => {
          await tx.ensureImageMirrors(merchantId, ['https://commit.example/a.jpg', 'https://commit.example/b.jpg'], AT);
        });
        await storage.upsertProductSources(
          merchantId,
          [
            {
              ref: 'C-1',
              source: { ...source([]), images: [{ url: 'https://commit.example/a.jpg' }, { url: 'https://commit.example/b.jpg' }] },
            },
          ],
          AT,
        );
        const before = await storage.imageStateCounts(merchantId);
        await first.query('BEGIN');
        await second.query('BEGIN');
        // A lock wait fails at once instead of hanging the test.
        await second.query("SET LOCAL lock_timeout = '2s'");
        await first.query("UPDATE image_mirrors SET state = 'mirrored' WHERE merchant_id = $1 AND url = $2", [
          merchantId,
          'https://commit.example/a.jpg',
        ]);
        await second.query("UPDATE image_mirrors SET state = 'mirrored' WHERE merchant_id = $1 AND url = $2", [
          merchantId,
          'https://commit.example/b.jpg',
        ]);
        // Neither is counted before it commits.
        expect(await storage.imageStateCounts(merchantId)).toEqual(before);
        await first.query('COMMIT');
        await second.query('COMMIT');
        expect(await storage.imageStateCounts(merchantId)).toEqual({
          ...before,
          pending: before.pending - 2,
          mirrored: before.mirrored + 2,
        });
      } finally {
        await Promise.all([first.end(), second.end()]);
      }
    },
  );
  it.skipIf(TEST_ENGINE !== 'postgres' || onPglite())(
    'PostgreSQL: counts new images at COMMIT too (migration 29), so a chunk that added images and a transition that holds the change sequencer never deadlock',
    async () => {
      const importing = new pg.Client(database.location);
      const mirroring = new pg.Client(database.location);
      await Promise.all([importing.connect(), mirroring.connect()]);
      try {
        await storage.transaction((tx) => tx.ensureImageMirrors(merchantId, ['https://deadlock.example/old.jpg'], AT));
        await storage.upsertProductSources(
          merchantId,
          [{ ref: 'D-1', source: { ...source([]), images: [{ url: 'https://deadlock.example/old.jpg' }] } }],
          AT,
        );
        const before = await storage.imageStateCounts(merchantId);
        const sequencer = `INSERT INTO change_sequences AS s (merchant_id, last_id, last_at) VALUES ($1, 1, $2)
        ON CONFLICT (merchant_id) DO UPDATE SET last_id = s.last_id + 1`;
        await importing.query('BEGIN');
        await mirroring.query('BEGIN');
        // The import's chunk adds a listed image (its source names it)...
        await importing.query(
          `INSERT INTO image_mirrors (merchant_id, url, origin, state, updated_at, next_attempt_at, listed)
        VALUES ($1, 'https://deadlock.example/new.jpg', 'https://deadlock.example', 'pending', $2, $2, 1)`,
          [merchantId, AT],
        );
        // ...while a transition records its change (the sequencer, held to COMMIT) and commits.
        await mirroring.query(
          "UPDATE image_mirrors SET state = 'mirrored' WHERE merchant_id = $1 AND url = 'https://deadlock.example/old.jpg'",
          [merchantId],
        );
        await mirroring.query(sequencer, [merchantId, AT]);
        const transitionCommitted = mirroring.query('COMMIT');
        // The chunk records its changes next: it waits for the transition's COMMIT, which must not wait for it.
        await importing.query(sequencer, [merchantId, AT]);
        await transitionCommitted;
        await importing.query('COMMIT');
        expect(await storage.imageStateCounts(merchantId)).toEqual({
          ...before,
          pending: before.pending - 1 + 1,
          mirrored: before.mirrored + 1,
        });
      } finally {
        await Promise.all([importing.end(), mirroring.end()]);
      }
    },
  );
  it.skipIf(TEST_ENGINE !== 'postgres' || onPglite())(
    'PostgreSQL: counts stay exact while another transaction holds the fold lock, after concurrent transitions from two connections, and are folded by the next statement',
    async () => {
      const holder = new pg.Client(database.location);
      const first = new pg.Client(database.location);
      const second = new pg.Client(database.location);
      await Promise.all([holder.connect(), first.connect(), second.connect()]);
      const urls = Array.from({ length: 40 }, (_, i) => `https://fold.example/${i}.jpg`);
      const recount = async () => {
        const counts = { pending: 0, mirrored: 0, dead: 0 };
        for (const row of (
          await holder.query<{ state: 'pending'; n: number }>(
            'SELECT state, count(*)::integer AS n FROM image_mirrors WHERE merchant_id = $1 AND listed > 0 GROUP BY state',
            [merchantId],
          )
        ).rows)
          counts[row.state] = row.n;
        return counts;
      };
      const deltas = async () =>
        (
          await holder.query<{ n: number }>('SELECT count(*)::integer AS n FROM image_state_count_deltas WHERE merchant_id = $1', [
            merchantId,
          ])
        ).rows[0]!.n;
      try {
        await storage.transaction((tx) => tx.ensureImageMirrors(merchantId, urls, AT));
        await storage.upsertProductSources(
          merchantId,
          urls.map((u, i) => ({ ref: `F-${i}`, source: { ...source([]), images: [{ url: u }] } })),
          AT,
        );
        expect(await storage.imageStateCounts(merchantId)).toEqual(await recount());
        // One transaction changes an image and so holds the merchant's fold lock, open.
        await holder.query('BEGIN');
        await holder.query("SET LOCAL lock_timeout = '2s'");
        await holder.query("UPDATE image_mirrors SET state = 'dead' WHERE merchant_id = $1 AND url = $2", [merchantId, urls[0]]);
        // Two connections mirror the other images at once, a statement of a few images at a time.
        const mirror = async (client: pg.Client, part: string[]) => {
          for (let i = 0; i < part.length; i += 4) {
            await client.query('BEGIN');
            await client.query("SET LOCAL lock_timeout = '2s'");
            await client.query("UPDATE image_mirrors SET state = 'mirrored' WHERE merchant_id = $1 AND url = ANY($2::text[])", [
              merchantId,
              part.slice(i, i + 4),
            ]);
            await client.query('COMMIT');
          }
        };
        await Promise.all([mirror(first, urls.slice(1, 21)), mirror(second, urls.slice(21))]);
        // Their deltas wait for the fold, and the counts include them (the holder's change not yet).
        expect(await deltas()).toBeGreaterThan(0);
        const committed = await storage.imageStateCounts(merchantId);
        await holder.query('ROLLBACK');
        expect(committed).toEqual(await recount());
        // The next statement that changes an image folds them all.
        await first.query("UPDATE image_mirrors SET state = 'dead' WHERE merchant_id = $1 AND url = $2", [merchantId, urls[0]]);
        expect(await deltas()).toBe(0);
        expect(await storage.imageStateCounts(merchantId)).toEqual(await recount());
      } finally {
        await Promise.all([holder.end(), first.end(), second.end()]);
      }
    },
  );
});
