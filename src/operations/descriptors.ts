// The process's file descriptor limit and the connection cap below it (CPS_MAX_CONNECTIONS,
// CPS_DESCRIPTOR_RESERVE): connections past the cap are answered 503, so the descriptors the
// database, the export spool, the worker threads and the logs need are never taken by sockets.
import fs from 'node:fs';

/** The limit assumed when /proc/self/limits cannot be read (not Linux): Linux's usual soft limit. */
export const ASSUMED_DESCRIPTOR_LIMIT = 1024;

/** What `/readyz` and the start-up log show of the cap. */
export interface ConnectionLimits {
  /** The soft RLIMIT_NOFILE as read at start; null when it could not be read. */
  descriptorLimit: number | null;
  descriptorReserve: number;
  /** Open connections the listener holds at most; one more is answered 503. */
  maxConnections: number;
  /** Connections past the cap answered at once (503, or the operations endpoints), then closed: a quarter of the reserve. */
  overflowConnections: number;
}

/** A listener's cap and its connections now (http/connection-cap.ts), for /readyz. */
export interface ConnectionsReadout {
  readonly limits: ConnectionLimits;
  readonly open: number;
}

/**
 * The soft limit of "Max open files" in the text of /proc/self/limits; undefined when the line is
 * missing or says `unlimited`.
 */
export function parseOpenFilesLimit(limits: string): number | undefined {
  const match = /^Max open files\s+(\S+)\s+(\S+)/m.exec(limits);
  if (!match || !/^\d+$/.test(match[1]!)) return undefined;
  return Number(match[1]);
}

/** The process's soft descriptor limit (Node has no API for getrlimit); undefined where /proc/self/limits cannot be read. */
export function readDescriptorLimit(read: () => string = () => fs.readFileSync('/proc/self/limits', 'utf8')): number | undefined {
  try {
    return parseOpenFilesLimit(read());
  } catch {
    return undefined;
  }
}

/** The cap: CPS_MAX_CONNECTIONS when set, else the limit (or ASSUMED_DESCRIPTOR_LIMIT) minus the reserve. */
export function connectionLimits(settings: {
  descriptorLimit: number | undefined;
  descriptorReserve: number;
  maxConnections: number | null;
}): ConnectionLimits {
  const { descriptorLimit, descriptorReserve, maxConnections } = settings;
  const derived = (descriptorLimit ?? ASSUMED_DESCRIPTOR_LIMIT) - descriptorReserve;
  if (maxConnections === null && derived < 1) {
    throw new RangeError(
      `the file descriptor limit (${descriptorLimit ?? ASSUMED_DESCRIPTOR_LIMIT}) leaves no connections after CPS_DESCRIPTOR_RESERVE (${descriptorReserve}): raise the limit (ulimit -n), lower the reserve or set CPS_MAX_CONNECTIONS`,
    );
  }
  return {
    descriptorLimit: descriptorLimit ?? null,
    descriptorReserve,
    maxConnections: maxConnections ?? derived,
    overflowConnections: Math.max(1, Math.floor(descriptorReserve / 4)),
  };
}
