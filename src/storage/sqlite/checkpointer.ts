// WAL checkpoints off the event loop. SQLite's automatic checkpoint runs inside the COMMIT that
// crosses the WAL's size threshold, on the committing connection: after a write of 100k payloads it
// copies ~100 MB back into the database file while the event loop waits. The write connection turns
// it off (wal_autocheckpoint = 0) and this worker thread, with a connection of its own, runs a
// PASSIVE checkpoint (it never waits for readers or the writer) at most once per interval after
// commits. journal_size_limit bounds the WAL file it leaves behind.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

// A script, not a module file: it runs the same under tsx, vitest and the compiled build.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 0');
db.pragma('journal_size_limit = ' + workerData.journalSizeLimit);
parentPort.on('message', (message) => {
  if (message === 'close') {
    db.close();
    process.exit(0);
  }
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage({ ok: true });
  } catch (error) {
    parentPort.postMessage({ ok: false, error: String(error && error.message || error) });
  }
});
`;

/** Bytes of WAL file kept after a checkpoint (the rest is truncated). */
const JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024;

export class Checkpointer {
  private readonly worker: Worker;
  private dirty = false;
  private running = false;
  private gone = false;
  private readonly timer: NodeJS.Timeout;
  private closed: Promise<void> | undefined;

  /** onGone: the worker ended (it crashed); the caller checkpoints some other way from then on. */
  constructor(file: string, intervalMs: number, onError: (error: string) => void, onGone: () => void) {
    this.worker = new Worker(WORKER, {
      eval: true,
      workerData: { file, driver: createRequire(import.meta.url).resolve('better-sqlite3'), journalSizeLimit: JOURNAL_SIZE_LIMIT },
    });
    this.worker.unref();
    this.worker.on('message', (result: { ok: boolean; error?: string }) => {
      this.running = false;
      if (!result.ok) onError(result.error ?? 'checkpoint failed');
    });
    this.worker.on('error', (error) => onError(String(error)));
    this.worker.once('exit', () => {
      this.gone = true;
      this.running = false;
      clearInterval(this.timer);
      if (!this.closed) onGone();
    });
    this.timer = setInterval(() => this.run(), intervalMs);
    this.timer.unref();
  }

  /** A transaction committed: the WAL holds frames to copy back. */
  committed(): void {
    this.dirty = true;
  }

  private run(): void {
    if (!this.dirty || this.running || this.closed || this.gone) return;
    this.dirty = false;
    this.running = true;
    this.worker.postMessage('checkpoint');
  }

  /** Lets a checkpoint in progress finish, then closes the worker's connection. */
  close(): Promise<void> {
    clearInterval(this.timer);
    this.closed ??= this.gone
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          this.worker.ref();
          this.worker.once('exit', () => resolve());
          this.worker.postMessage('close');
        });
    return this.closed;
  }
}
