// The peers of the benchmarks that run the whole service (bench:scale, bench:cost), seen from the
// bench: scripts/bench/scale-peers.ts in a child process of its own (an image origin, a second one, a
// hanging host, webhook receivers, all on 127.0.0.1), its ports, and the counts of what it served and received.
import { fork } from 'node:child_process';
import path from 'node:path';
import { candidateDir, moduleArguments, track } from './baseline.js';
import { DEAD_IMAGE_HOST, type ImageHosts } from './scale-catalog.js';

export interface Peers {
  hosts: ImageHosts;
  receiver: string;
  counts: () => Promise<{ images: number; fresh: number; gone: number; hangs: number; deliveries: number; byPath: Record<string, number> }>;
}

export async function startPeers(): Promise<Peers> {
  // The module last, Node's own arguments (tsx's loader, or none for the built tree) before it.
  const node = moduleArguments(candidateDir, 'scripts/bench/scale-peers.ts');
  const child = track(
    fork(path.resolve(candidateDir, node.at(-1)!), [], {
      cwd: candidateDir,
      execArgv: node.slice(0, -1),
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  const ports = await new Promise<{ origin: number; hang: number; receiver: number; fresh: number }>((resolve, reject) => {
    child.once('message', (m: any) => resolve(m.ports));
    child.once('exit', (code) => reject(new Error(`scale-peers exited ${code}`)));
  });
  let waiting: ((value: any) => void)[] = [];
  child.on('message', (m: any) => {
    if (m && typeof m.deliveries === 'number') {
      const all = waiting;
      waiting = [];
      for (const resolve of all) resolve(m);
    }
  });
  return {
    hosts: {
      origin: `http://127.0.0.1:${ports.origin}`,
      hang: `http://127.0.0.1:${ports.hang}`,
      fresh: `http://127.0.0.1:${ports.fresh}`,
      dead: DEAD_IMAGE_HOST,
    },
    receiver: `http://127.0.0.1:${ports.receiver}`,
    counts: () =>
      new Promise((resolve) => {
        waiting.push(resolve);
        if (waiting.length === 1) child.send('counts');
      }),
  };
}
