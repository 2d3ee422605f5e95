// A stream's client that stops reading keeps what the kernel took for it (its socket's send
// buffer: up to net.ipv4.tcp_wmem's maximum, 4 MiB on Linux by default) for as long as its
// connection stays open, and CPS_UNSENT_BYTES_MAX only bounds what waits in the process. So a
// change-feed stream whose connection has had bytes waiting, none of them taken, for
// CPS_FEED_STALL_TIMEOUT_MS is closed, as an export's is after CPS_EXPORT_STALL_TIMEOUT_MS.
//
// @example
// const stop = watchForStall(response, 60_000, () => closeNonReader(response));
// ... stop() once the stream ends
import type { ServerResponse } from 'node:http';

/** Calls `onStalled` once the response has had bytes waiting and taken none for `stallMs`; returns the function that stops watching. */
export function watchForStall(outgoing: ServerResponse, stallMs: number, onStalled: () => void, now: () => number = Date.now): () => void {
  let progressAt = now();
  const progressed = () => {
    progressAt = now();
  };
  const stop = () => {
    clearInterval(timer);
    outgoing.off('drain', progressed);
    outgoing.off('close', stop);
  };
  const timer = setInterval(
    () => {
      if (outgoing.writableLength === 0) return progressed();
      if (now() - progressAt < stallMs) return;
      stop();
      onStalled();
    },
    Math.max(10, Math.floor(stallMs / 4)),
  );
  timer.unref();
  outgoing.on('drain', progressed);
  outgoing.once('close', stop);
  return stop;
}
