// The seam the aggregates written once run on (src/storage/sql/dialect.ts): the same SQL, with
// PostgreSQL's $n placeholders (repeated, out of order), lists, booleans and typed parameters, reads
// and writes the same rows on the project's engine: SQLite's connection or PostgreSQL's.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresStorage } from '../../src/storage/postgres/index.js';
import { PgConnection } from '../../src/storage/postgres/connection.js';
import { SqliteConnection } from '../../src/storage/sqlite/connection.js';
import type { SqlConnection } from '../../src/storage/sql/dialect.js';
import { createTestDatabase, TEST_ENGINE, type TestDatabase } from '../support/engine.js';

let dir: string;
let database: TestDatabase | undefined;
let storage: PostgresStorage | undefined;
let db: Database.Database | undefined;
let c: SqlConnection;

beforeAll(async () => {
  if (TEST_ENGINE === 'sqlite') {
    db = new Database(':memory:');
    c = new SqliteConnection(db);
  } else {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-sql-dialect-'));
    database = await createTestDatabase(dir);
    storage = (await database.open()) as PostgresStorage;
    c = new PgConnection(storage.pool, false);
  }
  await c.run('CREATE TABLE dialect_probe (id bigint PRIMARY KEY, name text, kept boolean NOT NULL, parent bigint)');
});

afterAll(async () => {
  db?.close();
  await storage?.close();
  await database?.drop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe(`the SQL dialect seam on ${TEST_ENGINE}`, () => {
  it('binds $n placeholders by number, however often and in whatever order the statement names them', async () => {
    const d = c.dialect;
    for (const [id, name, kept, parent] of [
      [1, 'one', true, null],
      [2, 'two', false, 1],
      [3, 'three', true, 1],
    ] as const) {
      expect(
        await c.run('INSERT INTO dialect_probe (parent, kept, name, id) VALUES ($4, $3, $2, $1)', [id, name, d.bool(kept), parent]),
      ).toBe(1);
    }
    expect(await c.one('SELECT id, name FROM dialect_probe WHERE id = $2 OR name = $1 ORDER BY id LIMIT 1', ['three', 2])).toEqual({
      id: 2,
      name: 'two',
    });
    expect(await c.rows('SELECT id FROM dialect_probe WHERE id >= $1 AND id <= $1 + 1 ORDER BY id', [2])).toEqual([{ id: 2 }, { id: 3 }]);
    expect(await c.one('SELECT id FROM dialect_probe WHERE id = $1', [99])).toBeUndefined();
  });

  it('reads lists, booleans and NULL-compared parameters the same on both engines', async () => {
    const d = c.dialect;
    expect(await c.rows(`SELECT id FROM dialect_probe WHERE ${d.inList('id', '$1', 'bigint')} ORDER BY id`, [d.list([3, 1, 7])])).toEqual([
      { id: 1 },
      { id: 3 },
    ]);
    expect(
      await c.rows(
        `SELECT l.value FROM ${d.listRows('$1', 'text', 'l')} WHERE NOT EXISTS (
      SELECT 1 FROM dialect_probe AS p WHERE p.name = l.value) ORDER BY l.value`,
        [d.list(['two', 'four', 'five'])],
      ),
    ).toEqual([{ value: 'five' }, { value: 'four' }]);
    expect(await c.rows('SELECT id FROM dialect_probe WHERE kept AND NOT (id = 1) ORDER BY id')).toEqual([{ id: 3 }]);
    expect(
      await c.rows(`SELECT id FROM dialect_probe WHERE parent IS NOT DISTINCT FROM ${d.typed('$1', 'bigint')} ORDER BY id`, [null]),
    ).toEqual([{ id: 1 }]);
    expect(await c.run(`UPDATE dialect_probe SET kept = false WHERE ${d.inList('name', '$1', 'text')}`, [d.list(['one', 'three'])])).toBe(
      2,
    );
    expect(await c.one('SELECT count(*) AS n FROM dialect_probe WHERE kept')).toEqual({ n: 0 });
    expect(await c.one('DELETE FROM dialect_probe WHERE id = $1 RETURNING name', [2])).toEqual({ name: 'two' });
  });
});
