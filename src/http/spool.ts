// A response body written at the producer's pace and read at the client's: what the
// client has not read yet is kept in memory up to a budget, and past it in a temporary file, so a
// producer that holds something while it writes (a database snapshot) never waits for a slow
// client, and a slow client never costs more memory than the budget. The file is removed from its
// folder as soon as it is opened: nothing is left behind, whatever ends the process.
//
// @example
// const spool = new Spool(8 * 1024 * 1024, os.tmpdir());
// spool.push(bytes); spool.end();          // the producer, as fast as it goes
// return new Response(spool.stream());     // the client, with backpressure
import { randomUUID } from 'node:crypto';
import { open, unlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { SpoolAccount } from './spool-budget.js';

/** What one read from the file hands the client at most. */
const READ_BYTES = 1024 * 1024;

export class Spool {
  private readonly memory: Uint8Array[] = [];
  private memoryBytes = 0;
  private file: Promise<FileHandle> | undefined;
  /** File writes run one after another, in push order. */
  private writes: Promise<void> = Promise.resolve();
  /** Bytes handed to the file (offset of the next write), written to it, and read back from it. */
  private queued = 0;
  private written = 0;
  private readBack = 0;
  private ended = false;
  private failure: { error: unknown; ofFile: boolean } | undefined;
  private wake: (() => void) | undefined;
  /** Wakes a producer waiting for room (room()) when the client takes bytes. */
  private taken: (() => void) | undefined;
  /** Bytes handed to the file and counted in the disk budget, not yet given back. */
  private counted = 0;
  private readonly abandoned = new AbortController();
  /** When the client last asked for or took bytes, or was handed the stream; undefined before that. */
  private lastTaken: number | undefined;
  private settle!: () => void;
  /** Settles once the stream has ended, failed or been cancelled by the client (its file then closes). */
  readonly finished = new Promise<void>((resolve) => {
    this.settle = resolve;
  });

  constructor(
    private readonly memoryBudget: number,
    private readonly dir: string,
    /** The process's file budget (spool-budget.ts): the file's bytes count in it; none: unbounded. */
    private readonly disk?: SpoolAccount,
  ) {}

  /** Aborted when the client went away (or the spool failed): the producer may stop. */
  get signal(): AbortSignal {
    return this.abandoned.signal;
  }

  /** Bytes pushed and not read yet, in memory (for tests and metrics). */
  get bufferedInMemory(): number {
    return this.memoryBytes;
  }

  /** Bytes that went through the file so far (0 while the client keeps up). */
  get spooledBytes(): number {
    return this.queued;
  }

  /**
   * How long the client has left bytes waiting without taking any (ms): 0 before it was handed
   * the stream, while nothing waits for it (the producer is the slower one), or right after it took some.
   */
  stalledFor(now = performance.now()): number {
    const waiting = this.memoryBytes > 0 || this.queued > this.readBack;
    return waiting && this.lastTaken !== undefined ? Math.max(0, now - this.lastTaken) : 0;
  }

  /** Appends bytes after everything pushed before; never waits. */
  push(bytes: Uint8Array): void {
    if (this.ended || this.abandoned.signal.aborted || bytes.length === 0) return;
    // Memory only while the file holds nothing unread: every byte in memory precedes every byte in the file.
    if (this.queued === this.readBack && this.memoryBytes + bytes.length <= this.memoryBudget) {
      this.memory.push(bytes);
      this.memoryBytes += bytes.length;
    } else {
      this.toFile(bytes);
    }
    this.notify();
  }

  /**
   * Resolves once the next bytes may be pushed: at once while they would go to memory or the disk
   * budget has room; otherwise when bytes are freed (this client or another read some) or the client went away.
   */
  async room(): Promise<void> {
    const toFile = () => this.queued > this.readBack || this.memoryBytes >= this.memoryBudget;
    while (this.disk?.full && toFile() && !this.abandoned.signal.aborted) {
      await Promise.race([
        this.disk.freed(this.abandoned.signal),
        new Promise<void>((resolve) => {
          this.taken = resolve;
        }),
      ]);
    }
  }

  /** Nothing more will be pushed: the stream ends once the client has read everything. */
  end(): void {
    this.ended = true;
    this.notify();
  }

  /** The producer failed: the stream errors once the client has read what came before (the response is cut short). */
  fail(error: unknown): void {
    this.failWith(error, false);
  }

  private failWith(error: unknown, ofFile: boolean): void {
    this.failure ??= { error, ofFile };
    this.ended = true;
    this.notify();
  }

  /** The body: read with backpressure (the next chunk is taken when the client has taken this one). */
  stream(): ReadableStream<Uint8Array> {
    // The client's time starts when it is handed the stream, not when the producer began.
    this.lastTaken = performance.now();
    return new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          this.lastTaken = performance.now();
          try {
            const chunk = await this.next();
            this.lastTaken = performance.now();
            if (chunk) controller.enqueue(chunk);
            else {
              controller.close();
              void this.release();
            }
          } catch (error) {
            controller.error(error);
            this.abandoned.abort(error);
            void this.release();
          }
        },
        cancel: (reason) => {
          this.abandoned.abort(reason);
          this.ended = true;
          this.memory.length = 0;
          this.memoryBytes = 0;
          void this.release();
        },
      },
      { highWaterMark: 0 },
    );
  }

  private async next(): Promise<Uint8Array | undefined> {
    for (;;) {
      const chunk = this.memory.shift();
      if (chunk) {
        this.memoryBytes -= chunk.length;
        this.tookBytes();
        return chunk;
      }
      if (this.written > this.readBack) return this.readFromFile();
      // What was pushed before a failure of the producer is still handed over; the file's own failure ends it at once.
      if (this.failure && (this.failure.ofFile || this.queued === this.readBack)) throw this.failure.error;
      if (this.ended && this.queued === this.readBack) return undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  private async readFromFile(): Promise<Uint8Array> {
    const file = await this.file!;
    const length = Math.min(READ_BYTES, this.written - this.readBack);
    const buffer = Buffer.allocUnsafe(length);
    let read = 0;
    while (read < length) {
      const { bytesRead } = await file.read(buffer, read, length - read, this.readBack + read);
      if (bytesRead === 0) throw new Error('the export spool file ended early');
      read += bytesRead;
    }
    this.readBack += length;
    if (this.readBack === this.queued) {
      // Drained: the next bytes start over in memory, and the file over at its start.
      this.queued = this.written = this.readBack = 0;
      this.writes = this.writes.then(() => file.truncate(0));
      this.uncount();
    }
    this.tookBytes();
    return buffer;
  }

  private toFile(bytes: Uint8Array): void {
    const offset = this.queued;
    this.queued += bytes.length;
    this.counted += bytes.length;
    this.disk?.add(bytes.length);
    this.writes = this.writes
      .then(async () => {
        if (this.abandoned.signal.aborted) return;
        this.file ??= this.openFile();
        const file = await this.file;
        let done = 0;
        while (done < bytes.length) done += (await file.write(bytes, done, bytes.length - done, offset + done)).bytesWritten;
        this.written = offset + bytes.length;
        this.notify();
      })
      .catch((error: unknown) => this.failWith(error, true));
  }

  private async openFile(): Promise<FileHandle> {
    const name = path.join(this.dir, `cps-export-${randomUUID()}.spool`);
    const file = await open(name, 'wx+', 0o600);
    // Unlinked at once: the open handle keeps the bytes, and nothing stays behind after a crash.
    await unlink(name).catch(() => {});
    return file;
  }

  private tookBytes(): void {
    const taken = this.taken;
    this.taken = undefined;
    taken?.();
  }

  /** The file's bytes no longer count in the disk budget (read empty, or closed). */
  private uncount(): void {
    this.disk?.remove(this.counted);
    this.counted = 0;
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** The stream is over: `finished` settles now (before the client can see its end), the file closes once its pending writes are done. */
  private async release(): Promise<void> {
    this.settle();
    this.uncount();
    this.tookBytes();
    const file = this.file;
    this.file = undefined;
    if (file) {
      await this.writes.catch(() => {});
      await (await file.catch(() => undefined))?.close().catch(() => {});
    }
  }
}
