// Background work yields the CPU to the threads that answer requests (on 2 cores the re-publishing
// and coalescing took the serving thread's turns, and reads' p99 with them). On Linux the nice value
// belongs to a thread: setpriority(tid) lowers that thread alone, and threads it starts later inherit
// it. Elsewhere it would lower the whole process, so it is left alone.
//
// With the kernel's autogroups (sched_autogroup_enabled, a session a scheduling group) a thread's
// nice counts only against the threads of its own session: a `worker` in a session of its own, as a
// service unit or `setsid` runs it, weighed as much as each `serve` whatever its nice. So a worker
// that leads its session lowers the session's group too; one sharing a session with others (a
// shell, a container's init) leaves the group alone, since that would lower them too.
import fs from 'node:fs';
import os from 'node:os';
import type { Logger } from './log.js';

/** Lowers by `nice` (CPS_WORKER_NICE) the priority of this thread, or with `wholeProcess` of every thread the process has now and of its session's autogroup when it leads the session. */
export function lowerPriority(nice: number, logger: Logger, wholeProcess = false): void {
  if (process.platform !== 'linux' || nice <= 0) return;
  try {
    const threads = wholeProcess ? fs.readdirSync('/proc/self/task').map(Number) : [0];
    for (const tid of threads) os.setPriority(tid, Math.min(19, os.getPriority(tid) + nice));
  } catch (error) {
    logger.warn({ err: error, nice }, 'could not lower the priority of background work');
  }
  if (wholeProcess) lowerOwnAutogroup(nice, logger);
}

/** The autogroup's nice (/proc/self/autogroup: "/autogroup-N nice K"), or null without autogroups. */
export function autogroupNice(pid: number | 'self' = 'self'): number | null {
  try {
    const match = / nice (-?\d+)/.exec(fs.readFileSync(`/proc/${pid}/autogroup`, 'utf8'));
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}

/** Whether this process leads its session (its session id, field 6 of /proc/self/stat, is its pid). */
function leadsSession(): boolean {
  const stat = fs.readFileSync('/proc/self/stat', 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]) === process.pid;
}

function lowerOwnAutogroup(nice: number, logger: Logger): void {
  const current = autogroupNice();
  if (current === null) return;
  try {
    if (!leadsSession()) {
      logger.info({ nice }, "the worker shares its session: its autogroup's priority left alone");
      return;
    }
    const lowered = Math.min(19, current + nice);
    fs.writeFileSync('/proc/self/autogroup', String(lowered));
    logger.info({ autogroup_nice: lowered }, "the worker's session (its autogroup) lowered");
  } catch (error) {
    logger.warn({ err: error, nice }, "could not lower the priority of the worker's autogroup");
  }
}
