// The process's snapshot exports take turns (catalog/snapshot-export.ts): at most
// `concurrency` snapshots are read at once (each holds a database connection), at most
// `concurrencyPerMerchant` of one merchant, the others wait,
// and one whose client left while it waited is dropped without reading anything. A storage whose
// snapshots the test holds open stands in for the database; the real engines are exercised by
// test/changes/snapshot-export.test.ts.
import { describe, expect, it } from 'vitest';
import { SnapshotExports, type SnapshotSink } from '../../src/catalog/snapshot-export.js';
import type { CatalogStorage, StorageOperations } from '../../src/storage/port.js';

/** A storage whose every snapshot reads one store of one product, then waits until the test lets it end. */
function heldStorage() {
  const opened: { release: () => void }[] = [];
  const reader = {
    findDefaultStore: async () => ({ id: 7, merchant_id: 1, slug: 'de', active: true }),
    latestFeedPosition: async () => ({ at: '2025-03-14T09:26:53Z', id: 42 }),
    publishedLinesAfter: async (_store: number, afterId: number) =>
      afterId === 0 ? { bytes: Buffer.from('{"id":1}\n'), count: 1, lastId: 1 } : { bytes: Buffer.alloc(0), count: 0, lastId: null },
  } as unknown as StorageOperations;
  const storage = {
    snapshot: async <T>(fn: (r: StorageOperations) => Promise<T>) => {
      await new Promise<void>((resolve) => opened.push({ release: resolve }));
      return fn(reader);
    },
  } as unknown as CatalogStorage;
  return { storage, opened };
}

const sink = (): SnapshotSink & { lines: string[] } => {
  const lines: string[] = [];
  return { lines, begin: () => true, write: (bytes) => void lines.push(Buffer.from(bytes).toString('utf8')) };
};

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('SnapshotExports', () => {
  it('reads at most `concurrency` snapshots at once; the next one starts when one ends', async () => {
    const { storage, opened } = heldStorage();
    const exports = new SnapshotExports(storage, { stepRows: 10, concurrency: 2, concurrencyPerMerchant: 2 });
    const sinks = [sink(), sink(), sink()];
    const runs = sinks.map((s) => exports.export(1, undefined, s));
    await settle();
    expect(opened).toHaveLength(2);
    opened[0]!.release();
    await expect(runs[0]).resolves.toEqual({ store: 'de', count: 1, next_since: '2025-03-14T09:26:53Z', next_id: 42 });
    await settle();
    expect(opened).toHaveLength(3);
    opened[1]!.release();
    opened[2]!.release();
    await Promise.all(runs);
    expect(sinks[2]!.lines).toEqual(['{"id":1}\n', '{"store":"de","count":1,"next_since":"2025-03-14T09:26:53Z","next_id":42}\n']);
  });

  it('drops an export whose client left while it waited for its turn, without opening a snapshot for it', async () => {
    const { storage, opened } = heldStorage();
    const exports = new SnapshotExports(storage, { stepRows: 10, concurrency: 1, concurrencyPerMerchant: 1 });
    const first = exports.export(1, undefined, sink());
    const left = new AbortController();
    const waiting = exports.export(1, undefined, sink(), left.signal);
    const third = exports.export(1, undefined, sink());
    await settle();
    left.abort(new Error('client gone'));
    await expect(waiting).rejects.toThrow('client gone');
    opened[0]!.release();
    await first;
    await settle();
    // The turn went to the third export; the one that left never opened a snapshot.
    expect(opened).toHaveLength(2);
    opened[1]!.release();
    await expect(third).resolves.toMatchObject({ count: 1 });
  });

  it("gives a turn to another merchant's export while one merchant holds its share, ahead of that merchant's queued exports", async () => {
    const { storage, opened } = heldStorage();
    const exports = new SnapshotExports(storage, { stepRows: 10, concurrency: 2, concurrencyPerMerchant: 1 });
    // Merchant 1's clients stall: its first snapshot is held open; its second waits behind its share.
    const stalled = exports.export(1, undefined, sink());
    const queued = exports.export(1, undefined, sink());
    const other = exports.export(2, undefined, sink());
    await settle();
    // Two turns are in use: merchant 1's one, and merchant 2's, though merchant 1 asked first.
    expect(opened).toHaveLength(2);
    opened[1]!.release();
    await expect(other).resolves.toMatchObject({ count: 1 });
    await settle();
    // A free turn does not go to merchant 1's queued export while its first one still reads.
    expect(opened).toHaveLength(2);
    opened[0]!.release();
    await stalled;
    await settle();
    expect(opened).toHaveLength(3);
    opened[2]!.release();
    await expect(queued).resolves.toMatchObject({ count: 1 });
  });
});
