// The SQLite engine's own machinery: the WAL checkpoint worker, and transactions that wait for
// each other rather than for the event loop.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { setYieldSlice } from '../../src/shared/cooperative.js';
import { ROWS_PER_STATEMENT } from '../../src/storage/sqlite/batches.js';
import { openSqliteStorage, type SqliteStorage } from '../../src/storage/sqlite/index.js';

const dirs: string[] = [];
const open = (options: Parameters<typeof openSqliteStorage>[1] = {}) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-sqlite-'));
  dirs.push(dir);
  return openSqliteStorage(path.join(dir, 'catalog.db'), options);
};
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const worker = (storage: SqliteStorage) =>
  (storage as unknown as { checkpointer: { worker: import('node:worker_threads').Worker } }).checkpointer.worker;

describe('WAL checkpoints', () => {
  it('run off the event loop: the write connection never checkpoints in COMMIT', async () => {
    const storage = open();
    try {
      expect(storage.db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    } finally {
      await storage.close();
    }
  });

  it("fall back to SQLite's own checkpoint in COMMIT when the worker ends, and close still resolves", async () => {
    const errors: string[] = [];
    const storage = open({ onCheckpointError: (error) => errors.push(error) });
    await worker(storage).terminate();
    await new Promise((resolve) => setImmediate(resolve));
    expect(storage.db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
    expect(errors.join('\n')).toMatch(/checkpoint worker ended/);
    await storage.createMerchant({ name: 'Still writes', sku_pattern: null, owner_emails: [], created_at: '2026-11-26T00:00:00Z' });
    await storage.close();
  });
});

describe('transactions', () => {
  it('run one after another in the order they were asked for, each seeing the one before committed', async () => {
    const storage = open();
    try {
      const order: string[] = [];
      const slow = storage.transaction(async (tx) => {
        order.push('first begins');
        await new Promise((resolve) => setTimeout(resolve, 50));
        await tx.createMerchant({ name: 'First', sku_pattern: null, owner_emails: [], created_at: '2026-11-26T00:00:00Z' });
        order.push('first ends');
      });
      const next = storage.transaction(async (tx) => {
        order.push('second begins');
        return (await tx.listMerchants()).map((m) => m.name);
      });
      await slow;
      expect(await next).toEqual(['First']);
      expect(order).toEqual(['first begins', 'first ends', 'second begins']);
    } finally {
      await storage.close();
    }
  });

  it('roll back everything done through tx when the callback fails, and let the next one run', async () => {
    const storage = open();
    try {
      await expect(
        storage.transaction(async (tx) => {
          await tx.createMerchant({ name: 'Gone', sku_pattern: null, owner_emails: [], created_at: '2026-11-26T00:00:00Z' });
          throw new Error('fails after a write');
        }),
      ).rejects.toThrow('fails after a write');
      expect(await storage.countMerchants()).toBe(0);
      await storage.createMerchant({ name: 'Kept', sku_pattern: null, owner_emails: [], created_at: '2026-11-26T00:00:00Z' });
      expect(await storage.countMerchants()).toBe(1);
    } finally {
      await storage.close();
    }
  });

  it('leave plain reads on the last committed state while a write transaction is open', async () => {
    const storage = open();
    try {
      let seenDuring = -1;
      await storage.transaction(async (tx) => {
        await tx.createMerchant({ name: 'Uncommitted', sku_pattern: null, owner_emails: [], created_at: '2026-11-26T00:00:00Z' });
        seenDuring = await storage.countMerchants();
      });
      expect(seenDuring).toBe(0);
      expect(await storage.countMerchants()).toBe(1);
    } finally {
      await storage.close();
    }
  });
});

describe('another process holding the write lock', () => {
  const merchant = (name: string) => ({ name, sku_pattern: null, owner_emails: [], created_at: '2026-11-26T00:00:00Z' });

  it('is waited for without blocking the event loop, and the write goes through once it is released', async () => {
    const first = open();
    // A second storage on the same file: its own connections, as another process would have.
    const file = first.db.name;
    const second = openSqliteStorage(file);
    try {
      let release!: () => void;
      const held = first.transaction(async (tx) => {
        await tx.createMerchant(merchant('Holder'));
        await new Promise<void>((resolve) => {
          release = resolve;
        });
      });
      let waitingWrite = false;
      const waiting = second.transaction(async (tx) => {
        waitingWrite = true;
        await tx.createMerchant(merchant('Waiter'));
      });
      // Timers still fire while the second write waits for the lock.
      let ticks = 0;
      await new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          if (++ticks === 5) {
            clearInterval(timer);
            resolve();
          }
        }, 5);
      });
      expect(waitingWrite).toBe(false);
      release();
      await held;
      await waiting;
      expect((await second.listMerchants()).map((m) => m.name)).toEqual(['Holder', 'Waiter']);
    } finally {
      await second.close();
      await first.close();
    }
  });

  it('fails the write after the lock time-out, and the storage keeps working', async () => {
    const first = open();
    const second = openSqliteStorage(first.db.name, { lockTimeoutMs: 50 });
    try {
      let release!: () => void;
      const held = first.transaction(async () => {
        await new Promise<void>((resolve) => {
          release = resolve;
        });
      });
      await expect(second.createMerchant(merchant('Too late'))).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
      release();
      await held;
      await second.createMerchant(merchant('After'));
      expect((await first.listMerchants()).map((m) => m.name)).toEqual(['After']);
    } finally {
      await second.close();
      await first.close();
    }
  });
});

describe('bulk writes', () => {
  it('let requests run between batches of ROWS_PER_STATEMENT rows, and reads meanwhile see nothing of them before COMMIT', async () => {
    const storage = open();
    setYieldSlice(0);
    try {
      const { id: merchantId } = await storage.createMerchant({
        name: 'Bulk',
        sku_pattern: null,
        owner_emails: [],
        created_at: '2026-11-26T00:00:00Z',
      });
      const store = await storage.upsertStore(merchantId, 'de', {
        name: 'DE',
        locale: 'de-DE',
        currency: 'EUR',
        is_default: true,
        active: true,
        exclude_out_of_stock: false,
      });
      const count = 20 * ROWS_PER_STATEMENT;
      const changes = Array.from({ length: count }, (_, i) => ({ storeId: store.id, productId: i + 1, changeType: 'content' as const }));
      const from = { at: '1970-01-01T00:00:00Z', id: 0 };
      // A turn of the event loop after another while the write runs, each reading the feed.
      let writing = true;
      const seenMeanwhile: Promise<number>[] = [];
      const turn = () => {
        if (!writing) return;
        seenMeanwhile.push(storage.changesAfter(store.id, from, 10_000).then((rows) => rows.length));
        setImmediate(turn);
      };
      setImmediate(turn);
      await storage.transaction((tx) => tx.recordChanges(merchantId, changes, new Date('2026-11-26T12:00:00Z')));
      writing = false;
      const seen = await Promise.all(seenMeanwhile);
      // One synchronous loop over the rows would have let no turn run until it ended.
      expect(seen.length).toBeGreaterThanOrEqual(count / ROWS_PER_STATEMENT - 2);
      expect(seen.every((n) => n === 0)).toBe(true);
      expect((await storage.changesAfter(store.id, from, 10_000)).length).toBe(count);
    } finally {
      setYieldSlice(5);
      await storage.close();
    }
  });
});

describe('Snapshots', () => {
  /** Descriptors of this process open on the database file itself (one per SQLite connection). */
  const openOnFile = (file: string) =>
    fs.readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${fd}`) === file;
      } catch {
        return false;
      }
    }).length;

  it('hold at most snapshotConnections read connections however many run at once; the others wait for one and all complete', async () => {
    const storage = open({ snapshotConnections: 3 });
    const file = storage.db.name;
    try {
      // The write and read connections, and the checkpoint thread's once it has started (it opens
      // its own asynchronously: counted before it, it would pass for a fourth snapshot connection).
      await vi.waitFor(() => expect(openOnFile(file)).toBe(3));
      const before = openOnFile(file);
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let running = 0;
      let most = 0;
      const snapshots = Array.from({ length: 40 }, () =>
        storage.snapshot(async () => {
          running++;
          most = Math.max(most, running);
          await held;
          running--;
        }),
      );
      // The first three open (however slow the machine), then no fourth while they are held.
      await vi.waitFor(() => expect(running).toBe(3));
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(running).toBe(3);
      expect(openOnFile(file) - before).toBe(3);
      release();
      await Promise.all(snapshots);
      expect(most).toBe(3);
      // Kept for the next snapshots, never more than the bound.
      expect(openOnFile(file) - before).toBe(3);
    } finally {
      await storage.close();
    }
  });
});
