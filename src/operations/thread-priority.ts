// Background work yields the CPU to the threads that answer requests (on 2 cores the re-publishing
// and coalescing took the serving thread's turns, and reads' p99 with them). On Linux the nice value
// belongs to a thread: setpriority(tid) lowers that thread alone, and threads it starts later inherit
// it. Elsewhere it would lower the whole process, so it is left alone.
import fs from 'node:fs';
import os from 'node:os';
import type { Logger } from './log.js';

/** Lowers by `nice` (CPS_WORKER_NICE) the priority of this thread, or with `wholeProcess` of every thread the process has now. */
export function lowerPriority(nice: number, logger: Logger, wholeProcess = false): void {
  if (process.platform !== 'linux' || nice <= 0) return;
  try {
    const threads = wholeProcess ? fs.readdirSync('/proc/self/task').map(Number) : [0];
    for (const tid of threads) os.setPriority(tid, Math.min(19, os.getPriority(tid) + nice));
  } catch (error) {
    logger.warn({ err: error, nice }, 'could not lower the priority of background work');
  }
}
