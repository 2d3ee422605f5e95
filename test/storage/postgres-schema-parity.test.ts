// Both engines' migrations build the same schema: a fresh SQLite file and a fresh PostgreSQL
// database, every migration applied by the storage's own open, have the same tables, the same
// columns (their types compared through SQL_TYPES below), the same primary keys and unique
// constraints, and the same named indexes on the same columns. The differences that exist on
// purpose are listed in ON_PURPOSE, each with its reason; anything else fails the test.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStorage } from '../../src/storage/postgres/index.js';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';
import { startTestPostgres, type TestPostgres } from './pg-server.js';

/** A table's shape, as each engine's catalog reports it, in terms both share. */
interface Schema {
  /** table -> column -> type (SQL_TYPES' words) */
  columns: Map<string, Map<string, string>>;
  /** `table(col, ...)`: each table's primary key. */
  primaryKeys: Set<string>;
  /** `table(col, ...)`: unique constraints (and unique indexes), by their columns: each engine names them its own way. */
  uniques: Set<string>;
  /** index name -> `table(col, ...)[ WHERE]`, for indexes created by name (CREATE INDEX). */
  indexes: Map<string, string>;
}

/** Declared types, by the word both engines' columns are compared with. */
const SQL_TYPES: Record<string, string> = {
  // SQLite (its declared types; an INTEGER PRIMARY KEY is the rowid)
  INTEGER: 'integer',
  INT: 'integer',
  BIGINT: 'integer',
  TEXT: 'text',
  BLOB: 'bytes',
  REAL: 'real',
  BOOLEAN: 'boolean',
  // PostgreSQL (information_schema's data_type)
  bigint: 'integer',
  integer: 'integer',
  smallint: 'integer',
  text: 'text',
  bytea: 'bytes',
  'double precision': 'real',
  boolean: 'boolean',
};

/** SQLite has no boolean type: these columns hold 0 and 1 there (rows.ts `flag` and the dialect's `bool` read and write both). */
const BOOLEAN = 'a boolean: INTEGER 0/1 on SQLite';
/** Migration 35: SQLite cannot add an id to a table keyed by token_hash, so it rebuilt the table keyed by id; PostgreSQL added the id as a unique identity. Both columns are unique on both. */
const INVITATION_KEYS = 'panel_invitations keyed by id (SQLite) or token_hash (PostgreSQL), the other unique';
/** Migration 48: concurrent writers on PostgreSQL add count deltas; the one that gets a merchant's fold lock without waiting folds them. */
const IMAGE_COUNT_DELTAS = 'image state count deltas (PostgreSQL), folded without waiting; SQLite has one writer';
/** Migration 23: PostgreSQL keeps the payload's sku and ean beside it (parsing them for the index cost a third of an upsert); SQLite indexes the payload's fields. */

/**
 * Differences that exist on purpose, each `engine: what` as the comparison below words it, with
 * its reason. Every entry must still be a difference (a stale one fails the test too).
 */
const ON_PURPOSE: Record<string, string> = {
  'sqlite: panel_sessions.operator integer, postgres: boolean': BOOLEAN,
  'sqlite: pricing_rules.is_catch_all integer, postgres: boolean': BOOLEAN,
  'sqlite: stores.active integer, postgres: boolean': BOOLEAN,
  'sqlite: stores.exclude_out_of_stock integer, postgres: boolean': BOOLEAN,
  'sqlite: stores.is_default integer, postgres: boolean': BOOLEAN,
  'sqlite: webhook_deliveries.test integer, postgres: boolean': BOOLEAN,
  'sqlite: webhook_endpoints.standard_webhooks integer, postgres: boolean': BOOLEAN,
  'sqlite: idempotency_keys.write_committed integer, postgres: boolean': BOOLEAN,
  // Migration 2: a new store takes the next id never handed out (webhook payloads carry store ids);
  // PostgreSQL's identity never hands one out twice by itself.
  'sqlite: table store_id_sequence': 'store ids are never reused: a sequence table on SQLite, an identity on PostgreSQL',
  'sqlite: primary key panel_invitations(id)': INVITATION_KEYS,
  'sqlite: unique panel_invitations(token_hash)': INVITATION_KEYS,
  'postgres: primary key panel_invitations(token_hash)': INVITATION_KEYS,
  'postgres: unique panel_invitations(id)': INVITATION_KEYS,
  // Migration 28: PostgreSQL's planner misused it for image claims (they go by origin alone there);
  // SQLite's plans of those claims are checked by the tests (bounded-statements, image-claims).
  'sqlite: index image_mirrors_due_per_merchant image_mirrors(merchant_id, next_attempt_at) WHERE':
    'dropped on PostgreSQL, whose planner misused it',
  // Migration 48: PostgreSQL's image state counts per statement, as deltas that no writer waits to
  // fold; SQLite's one writer counts in its own transaction.
  'postgres: table image_state_count_deltas': IMAGE_COUNT_DELTAS,
  'postgres: index image_state_count_deltas_merchant image_state_count_deltas(merchant_id)': IMAGE_COUNT_DELTAS,
};

const typeOf = (engine: string, table: string, column: string, declared: string): string => {
  const word = SQL_TYPES[declared.replace(/\(.*\)$/, '').trim()];
  if (word === undefined) throw new Error(`${engine}: ${table}.${column} has a type the comparison does not know: ${declared}`);
  return word;
};

const key = (table: string, columns: readonly string[]) => `${table}(${columns.join(', ')})`;

function sqliteSchema(file: string): Schema {
  const db = new Database(file, { readonly: true });
  try {
    const schema: Schema = { columns: new Map(), primaryKeys: new Set(), uniques: new Set(), indexes: new Map() };
    const tables = db
      .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
      .pluck()
      .all() as string[];
    for (const table of tables) {
      const columns = db.prepare('SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid').all(table) as {
        name: string;
        type: string;
        pk: number;
      }[];
      schema.columns.set(table, new Map(columns.map((c) => [c.name, typeOf('sqlite', table, c.name, c.type)])));
      const pk = columns
        .filter((c) => c.pk > 0)
        .sort((a, b) => a.pk - b.pk)
        .map((c) => c.name);
      if (pk.length > 0) schema.primaryKeys.add(key(table, pk));
      const indexes = db.prepare('SELECT name, "unique", origin, partial FROM pragma_index_list(?)').all(table) as {
        name: string;
        unique: number;
        origin: 'c' | 'u' | 'pk';
        partial: number;
      }[];
      for (const index of indexes) {
        if (index.origin === 'pk') continue;
        const columnsOf = (
          db.prepare('SELECT cid, name FROM pragma_index_info(?) ORDER BY seqno').all(index.name) as { cid: number; name: string | null }[]
        ).map((c) => c.name ?? '<expression>');
        if (index.origin === 'u') schema.uniques.add(key(table, columnsOf));
        else schema.indexes.set(index.name, `${index.unique ? 'UNIQUE ' : ''}${key(table, columnsOf)}${index.partial ? ' WHERE' : ''}`);
      }
    }
    return schema;
  } finally {
    db.close();
  }
}

async function postgresSchema(url: string): Promise<Schema> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    const schema: Schema = { columns: new Map(), primaryKeys: new Set(), uniques: new Set(), indexes: new Map() };
    const columns = await client.query<{
      table_name: string;
      column_name: string;
      data_type: string;
    }>(`SELECT c.table_name, c.column_name, c.data_type
      FROM information_schema.columns AS c JOIN information_schema.tables AS t USING (table_schema, table_name)
      WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' ORDER BY c.table_name, c.ordinal_position`);
    for (const c of columns.rows) {
      if (!schema.columns.has(c.table_name)) schema.columns.set(c.table_name, new Map());
      schema.columns.get(c.table_name)!.set(c.column_name, typeOf('postgres', c.table_name, c.column_name, c.data_type));
    }
    // Each index with its key columns (an expression's own text), whether a constraint made it.
    const indexes = await client.query<{
      name: string;
      table: string;
      columns: string[];
      unique: boolean;
      primary: boolean;
      constraint: string | null;
      partial: boolean;
    }>(`
      SELECT i.relname AS name, t.relname AS table, x.indisunique AS unique, x.indisprimary AS primary, x.indpred IS NOT NULL AS partial,
        (SELECT contype::text FROM pg_constraint WHERE conindid = x.indexrelid LIMIT 1) AS constraint,
        ARRAY(SELECT CASE WHEN x.indkey[k - 1] = 0 THEN '<expression>' ELSE pg_get_indexdef(x.indexrelid, k, true) END
          FROM generate_series(1, x.indnkeyatts) AS k ORDER BY k) AS columns
      FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid JOIN pg_class AS t ON t.oid = x.indrelid
      JOIN pg_namespace AS n ON n.oid = t.relnamespace WHERE n.nspname = 'public'`);
    for (const index of indexes.rows) {
      if (index.primary) schema.primaryKeys.add(key(index.table, index.columns));
      else if (index.constraint === 'u') schema.uniques.add(key(index.table, index.columns));
      else
        schema.indexes.set(
          index.name,
          `${index.unique ? 'UNIQUE ' : ''}${key(index.table, index.columns)}${index.partial ? ' WHERE' : ''}`,
        );
    }
    return schema;
  } finally {
    await client.end();
  }
}

/** Every difference between the two schemas, one line each, `engine: what` (what only that engine has, or has so). */
function differences(sqlite: Schema, postgres: Schema): string[] {
  const found: string[] = [];
  const tables = new Set([...sqlite.columns.keys(), ...postgres.columns.keys()]);
  for (const table of [...tables].sort()) {
    const s = sqlite.columns.get(table);
    const p = postgres.columns.get(table);
    if (!s || !p) {
      found.push(`${s ? 'sqlite' : 'postgres'}: table ${table}`);
      continue;
    }
    for (const column of new Set([...s.keys(), ...p.keys()])) {
      if (!p.has(column)) found.push(`sqlite: column ${table}.${column}`);
      else if (!s.has(column)) found.push(`postgres: column ${table}.${column}`);
      else if (s.get(column) !== p.get(column)) found.push(`sqlite: ${table}.${column} ${s.get(column)}, postgres: ${p.get(column)}`);
    }
  }
  const sets = (what: string, a: Set<string>, b: Set<string>) => {
    for (const x of a) if (!b.has(x)) found.push(`sqlite: ${what} ${x}`);
    for (const x of b) if (!a.has(x)) found.push(`postgres: ${what} ${x}`);
  };
  sets('primary key', sqlite.primaryKeys, postgres.primaryKeys);
  sets('unique', sqlite.uniques, postgres.uniques);
  for (const name of new Set([...sqlite.indexes.keys(), ...postgres.indexes.keys()])) {
    const s = sqlite.indexes.get(name);
    const p = postgres.indexes.get(name);
    if (s === undefined || p === undefined) found.push(`${s === undefined ? 'postgres' : 'sqlite'}: index ${name} ${s ?? p}`);
    else if (s !== p) found.push(`sqlite: index ${name} ${s}, postgres: ${p}`);
  }
  return found.sort();
}

let server: TestPostgres;
let dir: string;
let sqlite: Schema;
let postgres: Schema;

beforeAll(async () => {
  server = await startTestPostgres();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-schema-parity-'));
  const file = path.join(dir, 'catalog.db');
  await openSqliteStorage(file).close();
  const url = await server.createDatabase('cps_schema_parity');
  const storage = openPostgresStorage(url, { poolSize: 1 });
  try {
    await storage.ready;
  } finally {
    await storage.close();
  }
  sqlite = sqliteSchema(file);
  postgres = await postgresSchema(url);
});

afterAll(async () => {
  await server?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe("both engines' migrations", () => {
  it('build the same tables, columns, keys and indexes, but for the differences listed on purpose', () => {
    expect(sqlite.columns.size).toBeGreaterThan(30);
    const found = differences(sqlite, postgres);
    expect(found.filter((difference) => !(difference in ON_PURPOSE))).toEqual([]);
    expect(Object.keys(ON_PURPOSE).filter((difference) => !found.includes(difference))).toEqual([]);
  });
});
