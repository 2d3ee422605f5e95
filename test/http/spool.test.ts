// The export's spool (src/http/spool.ts): what the client has not read waits in memory
// up to the budget and past it in a temporary file that no folder lists, in order, and the
// producer never waits for the client.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Spool } from '../../src/http/spool.js';

const bytes = (text: string) => Buffer.from(text, 'utf8');

async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  return Buffer.from(await new Response(stream).arrayBuffer()).toString('utf8');
}

describe('Spool', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-spool-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('keeps up to its budget in memory and the rest in a file, handing every byte back in order, the file listed in no folder', async () => {
    const spool = new Spool(10, dir);
    const stream = spool.stream();
    const pushed: string[] = [];
    for (let i = 0; i < 50; i++) {
      const line = `line ${i}\n`;
      pushed.push(line);
      spool.push(bytes(line));
    }
    expect(spool.bufferedInMemory).toBeLessThanOrEqual(10);
    expect(spool.spooledBytes).toBeGreaterThan(300);
    const reader = stream.getReader();
    let read = '';
    // Half read back, from the file too; then more pushed while the file still holds unread bytes: they queue behind them.
    while (read.length < pushed.join('').length / 2) read += Buffer.from((await reader.read()).value!).toString('utf8');
    // The file is open, and unlinked from the moment it was: nothing in the folder.
    expect(fs.readdirSync(dir)).toEqual([]);
    for (let i = 50; i < 60; i++) {
      pushed.push(`line ${i}\n`);
      spool.push(bytes(`line ${i}\n`));
    }
    spool.end();
    for (let next = await reader.read(); !next.done; next = await reader.read()) read += Buffer.from(next.value).toString('utf8');
    expect(read).toBe(pushed.join(''));
    await spool.finished;
  });

  it('goes back to memory once the file is drained, and keeps the order across both', async () => {
    const spool = new Spool(16, dir);
    const reader = spool.stream().getReader();
    const take = async () => Buffer.from((await reader.read()).value!).toString('utf8');
    spool.push(bytes('0123456789'));
    spool.push(bytes('abcdefghij')); // past the budget: to the file
    expect(await take()).toBe('0123456789');
    expect(await take()).toBe('abcdefghij');
    expect(spool.spooledBytes).toBe(0); // drained: the file starts over
    spool.push(bytes('klm'));
    expect(spool.bufferedInMemory).toBe(3);
    spool.push(bytes('nopqrstuvwxyz0123')); // past the budget again: the file, from its start
    spool.end();
    expect(await take()).toBe('klm');
    expect(await take()).toBe('nopqrstuvwxyz0123');
    expect((await reader.read()).done).toBe(true);
  });

  it('aborts its signal when the client goes away, and errors the stream after what came before when the producer fails', async () => {
    const left = new Spool(1024, dir);
    left.push(bytes('partial'));
    await left.stream().cancel('client gone');
    expect(left.signal.aborted).toBe(true);
    await left.finished;

    const failing = new Spool(8, dir);
    const reader = failing.stream().getReader();
    failing.push(bytes('first')); // in memory
    failing.push(bytes('second')); // past the budget: in the file
    failing.fail(new Error('database gone'));
    expect(Buffer.from((await reader.read()).value!).toString('utf8')).toBe('first');
    expect(Buffer.from((await reader.read()).value!).toString('utf8')).toBe('second');
    await expect(reader.read()).rejects.toThrow('database gone');
  });

  it('counts a stall only while bytes wait for a client that was handed the stream and takes none', async () => {
    const spool = new Spool(1024, dir);
    spool.push(bytes('waiting'));
    const later = () => performance.now() + 60_000;
    expect(spool.stalledFor(later())).toBe(0); // not handed to a client yet
    const reader = spool.stream().getReader();
    expect(spool.stalledFor(later())).toBeGreaterThan(59_000);
    await reader.read();
    expect(spool.stalledFor(later())).toBe(0); // nothing waits: the client is the faster one
    spool.push(bytes('more'));
    expect(spool.stalledFor(performance.now())).toBeLessThan(1000); // it just took some
    expect(spool.stalledFor(later())).toBeGreaterThan(59_000);
  });

  it('reads an empty body as empty', async () => {
    const spool = new Spool(4, dir);
    spool.end();
    expect(await readAll(spool.stream())).toBe('');
  });
});
