// What a process holds, read from Linux's /proc while a benchmark runs (bench:exhaust): its
// resident memory, its descriptors (sockets among them), the export spool files it has open (they
// are removed from their folder once opened, so only its descriptors still name them) and their
// bytes, and the kernel's memory for TCP buffers (machine-wide, /proc/net/sockstat); and the CPU
// time of processes, of a process's threads and of a PostgreSQL server's processes (bench:postgres, bench:cost).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface ProcessSample {
  rssBytes: number;
  fds: number;
  sockets: number;
  spoolFiles: number;
  /** Bytes in those files (their size) and on disk (their blocks). */
  spoolBytes: number;
  spoolDiskBytes: number;
  /** Every TCP socket's buffers on the machine (pages of 4 KiB). */
  tcpMemBytes: number;
}

const PAGE = 4096;

function statusField(pid: number, field: string): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return 1024 * Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
}

/** One look at `pid`; spool files are those under `spoolDir`. */
export function sampleProcess(pid: number, spoolDir: string): ProcessSample {
  const sample: ProcessSample = {
    rssBytes: statusField(pid, 'VmRSS'),
    fds: 0,
    sockets: 0,
    spoolFiles: 0,
    spoolBytes: 0,
    spoolDiskBytes: 0,
    tcpMemBytes: PAGE * Number(/^TCP:.* mem (\d+)/m.exec(fs.readFileSync('/proc/net/sockstat', 'utf8'))?.[1] ?? NaN),
  };
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    sample.fds++;
    let target: string;
    try {
      target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed meanwhile
    }
    if (target.startsWith('socket:')) sample.sockets++;
    else if (target.startsWith(`${spoolDir}/`)) {
      sample.spoolFiles++;
      try {
        const stat = fs.statSync(`/proc/${pid}/fd/${fd}`);
        sample.spoolBytes += stat.size;
        sample.spoolDiskBytes += stat.blocks * 512;
      } catch {
        /* closed meanwhile */
      }
    }
  }
  return sample;
}

/** Samples `pid` every `everyMs` until stopped: the peak of each figure over the run. */
export function startSampler(pid: number, spoolDir: string, everyMs: number): { stop(): ProcessSample } {
  // Resets the kernel's own peak (VmHWM) so that a peak between two samples is seen too.
  let hwm = true;
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    hwm = false;
  }
  const peak = sampleProcess(pid, spoolDir);
  const look = () => {
    const sample = sampleProcess(pid, spoolDir);
    for (const name of Object.keys(peak) as (keyof ProcessSample)[]) peak[name] = Math.max(peak[name], sample[name]);
  };
  const timer = setInterval(look, everyMs);
  return {
    stop() {
      clearInterval(timer);
      look();
      if (hwm) peak.rssBytes = Math.max(peak.rssBytes, statusField(pid, 'VmHWM'));
      return peak;
    },
  };
}

/** The soft limit of open descriptors of `pid` (`ulimit -n`). */
export function openFilesLimit(pid: number): number {
  return Number(/^Max open files\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/limits`, 'utf8'))?.[1] ?? NaN);
}

// ---- CPU time (bench:postgres, bench:cost) ----------------------------------------------------

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** The fields after "pid (comm) " of a /proc stat line, as numbers: state is [0], ppid [1], utime [11], stime [12], nice [16]. */
function statFields(stat: string): number[] {
  return stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
}

const ticksToUs = (ticks: number) => (ticks * 1e6) / TICKS_PER_SECOND;

/**
 * A process's CPU so far from /proc/<pid>/stat, µs: `own` is utime + stime (every thread of it,
 * ended ones included), `reaped` its waited-for children's (cutime + cstime); null when it is gone.
 */
export function procCpu(pid: number): { ppid: number; own: number; reaped: number } | null {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const fields = statFields(stat);
  return { ppid: fields[1]!, own: ticksToUs(fields[11]! + fields[12]!), reaped: ticksToUs(fields[13]! + fields[14]!) };
}

/** The summed own CPU of some processes so far, µs. */
export const processCpu = (pids: number[]) => pids.reduce((sum, pid) => sum + (procCpu(pid)?.own ?? 0), 0);

/**
 * Each live thread of `pid` (/proc/<pid>/task/*): its id, its name (comm; Node 20 names every
 * thread `node`), its nice value (serve's worker threads lower their own priority: CPS_WORKER_NICE)
 * and its CPU so far, µs.
 */
export function threadCpu(pid: number): { tid: number; name: string; nice: number; us: number }[] {
  const threads: { tid: number; name: string; nice: number; us: number }[] = [];
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return threads;
  }
  for (const tid of tids) {
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // ended meanwhile
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = statFields(stat);
    threads.push({ tid: Number(tid), name, nice: fields[16]!, us: ticksToUs(fields[11]! + fields[12]!) });
  }
  return threads;
}

/**
 * A thread's scheduler accounting so far (/proc/<pid>/task/<tid>/schedstat), µs: time it ran on a
 * core, time it was runnable but waited in a run queue for one (a busy machine's share of a
 * latency, not the thread's own work), and how many times it was put on a core; null when gone.
 */
export function threadSchedstat(pid: number, tid = pid): { runUs: number; waitUs: number; slices: number } | null {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8');
  } catch {
    return null;
  }
  const [run, wait, slices] = text.trim().split(' ').map(Number);
  return { runUs: run! / 1000, waitUs: wait! / 1000, slices: slices! };
}

/**
 * The scheduler autogroup of `pid` and its nice (/proc/<pid>/autogroup, e.g. "/autogroup-42 nice 0"): with
 * kernel.sched_autogroup_enabled every session (setsid) is one, and the CPU is shared between
 * them first; null when gone or without autogroups.
 */
export function autogroupOf(pid: number): string | null {
  try {
    return fs.readFileSync(`/proc/${pid}/autogroup`, 'utf8').trim() || null;
  } catch {
    return null;
  }
}

/** A PostgreSQL server's processes now (the postmaster and its children), from its data folder's postmaster.pid. */
export function postgresProcesses(dataDir: string): number[] {
  const postmaster = Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const pids = [postmaster];
  for (const entry of fs.readdirSync('/proc')) {
    if (/^\d+$/.test(entry) && procCpu(Number(entry))?.ppid === postmaster) pids.push(Number(entry));
  }
  return pids;
}

/**
 * A PostgreSQL server's CPU so far (µs), from its data folder's postmaster.pid: the postmaster, its
 * live children (backends, walwriter, checkpointer, autovacuum, ...) and the children it has reaped
 * (a backend that ended counts there).
 */
export function postgresServerCpu(dataDir: string): number {
  const postmaster = Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  let total = 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const cpu = procCpu(pid);
    if (!cpu) continue;
    if (pid === postmaster) total += cpu.own + cpu.reaped;
    else if (cpu.ppid === postmaster) total += cpu.own;
  }
  return total;
}
