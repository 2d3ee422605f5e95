// The command line (`catalog-publishing-service demo|keys|import`) against a real SQLite file,
// checked through the real public API served from that file.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { silentLogger } from '../src/operations/log.js';
import { startServer } from '../src/server.js';
import { createService } from '../src/service.js';
import { openSqliteStorage } from '../src/storage/sqlite/index.js';
import { runCli, type CliResult } from './support/cli.js';
import { contractFetch } from './support/contract.js';
import { nodeArguments } from './support/node-command.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let dir: string;
let db: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-cli-'));
  db = path.join(dir, 'catalog.db');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI; resolves with its exit code and output (never rejects on a non-zero exit). */
function cli(...args: string[]): Promise<CliResult> {
  return runCli(args, { CPS_DB_PATH: path.join(dir, 'unused.db') });
}

/** GETs a public path from a server started on the CLI's database file, then stops it. */
async function publicGet(pathAndQuery: string, key: string): Promise<{ status: number; body: any }> {
  const service = createService(
    loadConfig(
      {},
      {
        port: 0,
        host: '127.0.0.1',
        databasePath: db,
        adminToken: 'adm_cli_test_token',
        adminTokenConfigured: true,
        demoOnEmpty: false,
      },
    ),
    { logger: silentLogger, storage: openSqliteStorage(db) },
  );
  try {
    const server = await startServer(service, { docsDir: path.join(dir, 'no-docs') });
    try {
      const response = await contractFetch()(`${server.url}${pathAndQuery}`, { headers: { Authorization: `Bearer ${key}` } });
      return { status: response.status, body: await response.json() };
    } finally {
      await server.close();
    }
  } finally {
    await service.close();
  }
}

describe('the command line', () => {
  let demoKey: string;

  it('demo --db FILE --products 50 --json prints one JSON object with merchant_id and api_key', async () => {
    const result = await cli('demo', '--db', db, '--products', '50', '--json');
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const demo = JSON.parse(lines[0]!);
    expect(demo).toEqual({
      merchant_id: 1,
      api_key: expect.stringMatching(/^cps_[A-Za-z0-9_-]{43}$/),
      stores: ['de', 'pl', 'uk'],
      products: 50,
    });
    demoKey = demo.api_key;
    expect(fs.existsSync(db)).toBe(true);
    expect(fs.existsSync(path.join(dir, 'unused.db'))).toBe(false);
    const page = await publicGet('/v1/products?per_page=200', demoKey);
    expect(page.status).toBe(200);
    expect(page.body.meta).toEqual({ current_page: 1, per_page: 200, last_page: 1, total: 50 });
    const stores = await publicGet('/v1/stores', demoKey);
    expect(stores.body.data.map((s: { slug: string }) => s.slug)).toEqual(['de', 'pl', 'uk']);
  });

  it('keys create --merchant 1 --db FILE prints a key that works on the public API', async () => {
    const result = await cli('keys', 'create', '--merchant', '1', '--db', db);
    expect(result.code, result.stderr).toBe(0);
    const key = /cps_[A-Za-z0-9_-]{43}/.exec(result.stdout)?.[0];
    expect(key).toBeDefined();
    expect(key).not.toBe(demoKey);
    const stores = await publicGet('/v1/stores', key!);
    expect(stores.status).toBe(200);
    expect(stores.body.data[0]).toMatchObject({ slug: 'de', is_default: true });
  });

  it('keys create --scopes --stores issues a key restricted to them, and refuses an unknown scope with exit code 2', async () => {
    const result = await cli(
      'keys',
      'create',
      '--merchant',
      '1',
      '--name',
      'shop-pl',
      '--scopes',
      'catalog:read,webhooks:read',
      '--stores',
      'pl',
      '--json',
      '--db',
      db,
    );
    expect(result.code, result.stderr).toBe(0);
    const key = JSON.parse(result.stdout);
    expect(key).toMatchObject({ scopes: ['catalog:read', 'webhooks:read'], stores: ['pl'] });
    const stores = await publicGet('/v1/stores', key.key);
    expect(stores.body.data.map((s: { slug: string }) => s.slug)).toEqual(['pl']);
    const refused = await cli('keys', 'create', '--merchant', '1', '--scopes', 'catalog:admin', '--db', db);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--scopes/);
    expect(refused.stdout).not.toMatch(/cps_/);
  });

  it('keys create --expires-at issues a key that expires then; keys roll prints a new key and ends the old one at --expires-at (default now)', async () => {
    const expiresAt = new Date(Date.now() + 3600_000).toISOString();
    const created = await cli('keys', 'create', '--merchant', '1', '--name', 'erp', '--expires-at', expiresAt, '--json', '--db', db);
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout);
    expect(key.expires_at).toBe(expiresAt);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString();
    const rolled = await cli('keys', 'roll', '--merchant', '1', '--key', String(key.id), '--expires-at', tomorrow, '--json', '--db', db);
    expect(rolled.code, rolled.stderr).toBe(0);
    const next = JSON.parse(rolled.stdout);
    expect(next).toMatchObject({ name: 'erp', rolled_from: key.id, expires_at: null });
    // The old key keeps its sooner expiry and works until then, as the new one does.
    expect((await publicGet('/v1/stores', key.key)).status).toBe(200);
    expect((await publicGet('/v1/stores', next.key)).status).toBe(200);
    // The list and a refused roll (it changes nothing) are independent of each other: side by side.
    const [listedRun, tooLate] = await Promise.all([
      cli('keys', 'list', '--merchant', '1', '--json', '--db', db),
      cli('keys', 'roll', '--merchant', '1', '--key', String(next.id), '--expires-at', '2999-01-01T00:00:00Z', '--db', db),
    ]);
    const listed = JSON.parse(listedRun.stdout);
    expect(listed.find((k: { id: number }) => k.id === key.id).expires_at).toBe(expiresAt);
    expect(tooLate.code).not.toBe(0);
    expect(tooLate.stdout).not.toMatch(/cps_/);
    const now = await cli('keys', 'roll', '--merchant', '1', '--key', String(next.id), '--db', db);
    expect(now.code, now.stderr).toBe(0);
    expect(now.stdout).toMatch(new RegExp(`replacing key ${next.id} \\(shown once\\): cps_`));
    expect((await publicGet('/v1/stores', next.key)).status).toBe(401);
  });

  it("keys create --allowed-origins lists a key's browser origins; keys update replaces them (or, with '', removes them) and renames it; a path is refused", async () => {
    const created = await cli(
      'keys',
      'create',
      '--merchant',
      '1',
      '--name',
      'pages',
      '--allowed-origins',
      'https://shop.example.com',
      '--json',
      '--db',
      db,
    );
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout);
    expect(key.allowed_origins).toEqual(['https://shop.example.com']);
    const update = (...args: string[]) => cli('keys', 'update', '--merchant', '1', '--key', String(key.id), ...args, '--json', '--db', db);
    const moved = await update('--allowed-origins', 'https://shop.example.com,http://localhost:5173', '--name', 'shop pages');
    expect(moved.code, moved.stderr).toBe(0);
    expect(JSON.parse(moved.stdout)).toMatchObject({
      id: key.id,
      name: 'shop pages',
      allowed_origins: ['https://shop.example.com', 'http://localhost:5173'],
    });
    expect(JSON.parse(moved.stdout).key).toBeUndefined();
    const none = await update('--allowed-origins', '');
    expect(JSON.parse(none.stdout)).toMatchObject({ name: 'shop pages', allowed_origins: [] });
    const refused = await update('--allowed-origins', 'https://shop.example.com/');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/allowed.origins/);
  });

  it('keys create for an unknown merchant exits non-zero and issues nothing', async () => {
    const result = await cli('keys', 'create', '--merchant', '99', '--db', db);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/Merchant 99/);
    expect(result.stdout).not.toMatch(/cps_/);
  });

  it('users invite prints a single-use panel link; users list shows the user once the password is set; users reset prints a reset link; users remove removes them', async () => {
    const invited = await cli('users', 'invite', '--merchant', '1', '--email', 'cli@demo.test', '--role', 'member', '--json', '--db', db);
    expect(invited.code, invited.stderr).toBe(0);
    const invitation = JSON.parse(invited.stdout);
    expect(invitation).toMatchObject({ email: 'cli@demo.test', role: 'member' });
    const secret = /\/panel\/invitations\/([A-Za-z0-9_-]{43})$/.exec(invitation.link)?.[1];
    expect(secret).toBeDefined();
    const service = createService(loadConfig({}, { databasePath: db, adminToken: 'adm_cli_test_token' }), { logger: silentLogger });
    try {
      await service.accounts.acceptInvitation(secret!, 'a password long enough');
    } finally {
      await service.close();
    }
    const listed = await cli('users', 'list', '--merchant', '1', '--json', '--db', db);
    const users = JSON.parse(listed.stdout) as { id: number; email: string }[];
    expect(users.map((u) => u.email)).toEqual(['cli@demo.test']);
    const reset = await cli('users', 'reset', '--merchant', '1', '--user', String(users[0]!.id), '--json', '--db', db);
    expect(reset.code, reset.stderr).toBe(0);
    expect(JSON.parse(reset.stdout)).toMatchObject({
      email: 'cli@demo.test',
      link: expect.stringMatching(/\/panel\/invitations\/[A-Za-z0-9_-]{43}$/),
    });
    expect((await cli('users', 'remove', '--merchant', '1', '--user', String(users[0]!.id), '--db', db)).code).toBe(0);
    expect(JSON.parse((await cli('users', 'list', '--merchant', '1', '--json', '--db', db)).stdout)).toEqual([]);
    const bad = await cli('users', 'invite', '--merchant', '1', '--email', 'nope', '--db', db);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/\/email/);
  }, 120_000);

  it('import FILE --merchant 1 --db FILE applies an NDJSON file', async () => {
    const file = path.join(dir, 'products.ndjson');
    fs.writeFileSync(
      file,
      [
        {
          op: 'upsert_product',
          product: {
            ref: 'CLI-1',
            content: { de: { title: 'Kommandozeilen-Zelt' } },
            offers: [{ supplier_ref: 'alpine-wholesale', quantity: 3, cost: '99.00', currency: 'EUR' }],
          },
        },
        { op: 'upsert_product', product: { ref: 'CLI-2', content: { de: { title: 'Zweites Produkt' } } } },
        { op: 'delete_product', ref: 'DEMO-000001' },
      ]
        .map((line) => JSON.stringify(line))
        .join('\n'),
    );
    const result = await cli('import', file, '--merchant', '1', '--db', db);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout.trim().split('\n').at(-1)!)).toEqual({
      import_id: expect.any(Number),
      lines: 3,
      upserted: 2,
      deleted: 1,
    });
    // Off a terminal: where the import is, a line at its start and one with its outcome.
    expect(result.stderr).toMatch(/^import \d+ of products\.ndjson started/m);
    expect(result.stderr).toMatch(/^import \d+ succeeded: 3 lines read, 3 of 3 operations applied$/m);
    const page = await publicGet('/v1/products?per_page=200', demoKey);
    expect(page.body.meta.total).toBe(51);
    const ids = page.body.data.map((p: { id: number }) => p.id);
    expect(ids).not.toContain(1);
    const imported = page.body.data.filter((p: { title: string }) => ['Kommandozeilen-Zelt', 'Zweites Produkt'].includes(p.title));
    expect(
      imported.map((p: { id: number; stock: number; exclusion_reason: string | null }) => [p.id, p.stock, p.exclusion_reason]),
    ).toEqual([
      [51, 3, null],
      [52, 0, 'no_offers'],
    ]);
    expect((await publicGet('/v1/products/1', demoKey)).status).toBe(404);
  });

  it('exits non-zero naming the bad line of an invalid import, and applies nothing', async () => {
    const file = path.join(dir, 'bad.ndjson');
    fs.writeFileSync(
      file,
      [
        JSON.stringify({ op: 'upsert_product', product: { ref: 'CLI-3', content: { de: { title: 'Gut' } } } }),
        JSON.stringify({
          op: 'upsert_product',
          product: { ref: 'CLI-4', offers: [{ supplier_ref: 'nobody', quantity: 1, cost: '1.00', currency: 'EUR' }] },
        }),
        JSON.stringify({ op: 'delete_product', ref: 'DEMO-000002' }),
      ].join('\n'),
    );
    const result = await cli('import', file, '--merchant', '1', '--db', db);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('line 2');
    expect(result.stderr).toContain('unknown supplier "nobody"');
    expect(result.stderr).not.toContain('line 1');
    const page = await publicGet('/v1/products?per_page=200', demoKey);
    expect(page.body.meta.total).toBe(51);
    expect(page.body.data.map((p: { id: number }) => p.id)).toContain(2);
  });

  it('exits non-zero naming a line whose bytes are not UTF-8, and applies nothing', async () => {
    const file = path.join(dir, 'latin1.ndjson');
    fs.writeFileSync(
      file,
      Buffer.concat([
        Buffer.from(`${JSON.stringify({ op: 'upsert_product', product: { ref: 'CLI-5', content: { de: { title: 'Gut' } } } })}\n`),
        Buffer.from('{"op": "upsert_product", "product": {"ref": "CLI-6", "content": {"de": {"title": "Gr'),
        Buffer.from([0xfc]),
        Buffer.from('n"}}}}\n'),
      ]),
    );
    const result = await cli('import', file, '--merchant', '1', '--db', db);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/line 2: is not valid UTF-8: an invalid byte sequence \(FC\) at byte \d+/);
    expect(result.stderr).not.toContain('line 1');
    const page = await publicGet('/v1/products?per_page=200', demoKey);
    expect(page.body.meta.total).toBe(51);
  });
});

describe('the operator commands', () => {
  const json = (out: string) => JSON.parse(out);

  it('merchants create and list; stores set, list and delete; keys list and revoke', async () => {
    const created = await cli('merchants', 'create', '--name', 'CLI Outfitters', '--db', db, '--json');
    expect(created.code, created.stderr).toBe(0);
    const merchant = json(created.stdout);
    expect(merchant).toMatchObject({ id: expect.any(Number), name: 'CLI Outfitters' });
    const listed = await cli('merchants', 'list', '--db', db, '--json');
    expect(json(listed.stdout).map((m: { name: string }) => m.name)).toContain('CLI Outfitters');
    expect((await cli('merchants', 'create', '--name', '', '--db', db)).stderr).toMatch(/--name: /);

    const id = String(merchant.id);
    const store = await cli(
      'stores',
      'set',
      '--merchant',
      id,
      '--store',
      'de',
      '--name',
      'CLI DE',
      '--locale',
      'de-DE',
      '--currency',
      'EUR',
      '--db',
      db,
      '--json',
    );
    expect(store.code, store.stderr).toBe(0);
    expect(json(store.stdout)).toMatchObject({
      slug: 'de',
      name: 'CLI DE',
      locale: 'de-DE',
      currency: 'EUR',
      is_default: true,
      active: true,
    });
    await cli(
      'stores',
      'set',
      '--merchant',
      id,
      '--store',
      'pl',
      '--name',
      'CLI PL',
      '--locale',
      'pl-PL',
      '--currency',
      'PLN',
      '--inactive',
      '--db',
      db,
    );
    const bad = await cli(
      'stores',
      'set',
      '--merchant',
      id,
      '--store',
      'us',
      '--name',
      'US',
      '--locale',
      'english',
      '--currency',
      'usd',
      '--db',
      db,
    );
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--locale: /);
    expect(bad.stderr).toMatch(/--currency: /);
    const stores = json((await cli('stores', 'list', '--merchant', id, '--db', db, '--json')).stdout);
    expect(stores.map((s: { slug: string; active: boolean }) => [s.slug, s.active])).toEqual([
      ['de', true],
      ['pl', false],
    ]);
    expect((await cli('stores', 'delete', '--merchant', id, '--store', 'pl', '--db', db)).stdout.trim()).toBe('deleted');
    expect(json((await cli('stores', 'list', '--merchant', id, '--db', db, '--json')).stdout).map((s: { slug: string }) => s.slug)).toEqual(
      ['de'],
    );

    const key = json((await cli('keys', 'create', '--merchant', id, '--name', 'feed', '--db', db, '--json')).stdout);
    const keys = json((await cli('keys', 'list', '--merchant', id, '--db', db, '--json')).stdout);
    expect(keys).toEqual([expect.objectContaining({ id: key.id, name: 'feed', prefix: key.key.slice(0, 12), revoked_at: null })]);
    expect(JSON.stringify(keys)).not.toContain(key.key);
    expect((await cli('keys', 'revoke', '--merchant', id, '--key', String(key.id), '--db', db)).stdout.trim()).toBe('revoked');
    expect((await publicGet('/v1/stores', key.key)).status).toBe(401);
    expect(json((await cli('keys', 'list', '--merchant', id, '--db', db, '--json')).stdout)[0].revoked_at).toEqual(expect.any(String));
  }, 240_000);

  it("imports list and show the CLI's imports with their outcome; off a terminal the import prints its progress every --progress-seconds", async () => {
    // A named pipe: the file arrives while the import reads it, as a slow upload would.
    const fifo = path.join(dir, 'slow.ndjson');
    execFileSync('mkfifo', [fifo]);
    const child = spawn(
      process.execPath,
      nodeArguments('src/cli.ts', ['import', fifo, '--merchant', '1', '--db', db, '--progress-seconds', '0.1']),
      {
        cwd: ROOT,
      },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const writer = fs.createWriteStream(fifo);
    const line = (n: number) =>
      `${JSON.stringify({ op: 'upsert_product', product: { ref: `SLOW-${n}`, content: { de: { title: `Langsam ${n}` } } } })}\n`;
    writer.write(Array.from({ length: 40 }, (_, n) => line(n)).join(''));
    const deadline = Date.now() + 60_000;
    while (!/lines read and checked/.test(stderr)) {
      if (Date.now() > deadline) throw new Error(`no progress line: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    writer.end(line(40));
    expect(await exited).toBe(0);
    expect(stderr).toMatch(/^import (\d+): 32 lines read and checked$/m);
    const id = /^import (\d+) of slow\.ndjson started/m.exec(stderr)![1]!;
    expect(stderr).toMatch(new RegExp(`^import ${id} succeeded: 41 lines read, 41 of 41 operations applied$`, 'm'));

    const listed = json((await cli('imports', 'list', '--merchant', '1', '--db', db, '--json')).stdout);
    expect(listed[0]).toMatchObject({ id: Number(id), started_by: 'CLI', file_name: 'slow.ndjson', state: 'succeeded', upserted: 41 });
    const shown = await cli('imports', 'show', '--merchant', '1', '--import', id, '--db', db, '--json');
    expect(json(shown.stdout)).toEqual(listed[0]);
    expect((await cli('imports', 'show', '--merchant', '1', '--import', '999999', '--db', db)).code).toBe(2);
  }, 120_000);
});
