// A request body that ends because its client closed the connection (an abandoned upload) is the
// client's doing, not a failure of the service: the import job records it as an interrupted
// upload, and the HTTP layer counts it as a client abort (499, src/http/client-abort.ts).

/** True for the error a request body's stream fails with when its client closed the connection. */
export function isClientAbort(error: unknown): boolean {
  for (
    let e = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 4;
    e = e.cause as typeof e, depth++
  ) {
    // Node's http server destroys an unfinished request with ECONNRESET "aborted" when its socket closes.
    if (e.code === 'ECONNRESET' && e.message === 'aborted') return true;
  }
  return false;
}
