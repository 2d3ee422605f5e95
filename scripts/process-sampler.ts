// What a process holds, read from Linux's /proc while a benchmark runs (bench:exhaust): its
// resident memory, its descriptors (sockets among them), the export spool files it has open (they
// are removed from their folder once opened, so only its descriptors still name them) and their
// bytes, and the kernel's memory for TCP buffers (machine-wide, /proc/net/sockstat).
import fs from 'node:fs';

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
