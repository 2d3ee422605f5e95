// A client that does not read: what the process holds for its connection is bounded. Past what
// the kernel's socket buffers took, bytes written to a connection wait in the process
// (ServerResponse.writableLength, its socket's queue included); once they and the next bytes would
// pass CPS_UNSENT_BYTES_MAX, the connection is reset instead (its buffers freed at once, the kernel's
// too) rather than queue more. Used where the service writes on its own initiative: change-feed
// streams (live-feed.ts) and long-poll answers (direct-answer.ts).
//
// @example
// if (!unsentRoom(outgoing, bytes.length, max)) return closeNonReader(outgoing);
import type { ServerResponse } from 'node:http';

/** Bytes written to the connection that wait in the process (not yet taken by the kernel). */
export function unsentBytes(outgoing: ServerResponse | undefined): number {
  return outgoing?.writableLength ?? 0;
}

/** True while the kernel took everything written so far, or what waits and `next` more bytes stay within `max`. */
export function unsentRoom(outgoing: ServerResponse | undefined, next: number, max: number): boolean {
  const waiting = unsentBytes(outgoing);
  return waiting === 0 || waiting + next <= max;
}

/** Ends a connection whose client does not read: a reset drops what waits for it (in the process and the kernel). */
export function closeNonReader(outgoing: ServerResponse | undefined): void {
  const socket = outgoing?.socket;
  if (socket && !socket.destroyed) socket.resetAndDestroy();
  outgoing?.destroy();
}
