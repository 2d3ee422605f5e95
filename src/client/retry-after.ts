// Sending a request again when the service asks the client to come back later (a 429 or 503 with
// `Retry-After`, RFC 9110 section 10.2.3): the read client waits out rate limits with it, the admin
// client rate limits and a full process alike. Runtime-neutral (fetch's Request and Response).

export interface RetryAfterOptions {
  /** Times one request is sent again after such an answer (default 3); then the answer is returned. */
  retries?: number;
  /** An answer whose `Retry-After` asks for a longer wait than this is returned at once (default 60). */
  maxWaitSeconds?: number;
  /** How to wait (tests pass a fake clock's); defaults to a timer that the request's abort signal cuts short. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/** Seconds to wait before sending a request again after `response`; undefined: hand the response back. */
export type RetryDelay = (response: Response) => number | undefined;

/** A timer that rejects with the signal's reason as soon as the request is aborted. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    // An abort rejects with the signal's reason, as fetch does (the caller's value; an AbortError by default).
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the reason is the caller's, passed on as fetch passes it
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- as above
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The wait a response's `Retry-After` asks for, in whole seconds: delay-seconds as given, an
 * HTTP-date counted from the response's own `Date` (so that the two clocks need not agree; from
 * now without one), never below 0. Undefined when the header is missing or unreadable.
 */
export function retryAfterSeconds(response: Response): number | undefined {
  const header = response.headers.get('Retry-After')?.trim();
  if (!header) return undefined;
  if (/^[0-9]+$/.test(header)) return Number(header);
  const at = Date.parse(header);
  if (Number.isNaN(at)) return undefined;
  const sent = Date.parse(response.headers.get('Date') ?? '');
  return Math.max(0, Math.ceil((at - (Number.isNaN(sent) ? Date.now() : sent)) / 1000));
}

/**
 * `send`, sending a request again (a clone of it, headers and body included) for as long as
 * `delayOf` names a wait for its answer, at most `retries` times; each wait is slept first, and
 * one above `maxWaitSeconds` hands the answer back at once. Cancelling the request (its
 * AbortSignal) ends a wait at once, with the abort's reason.
 */
export function retryingAfter(
  send: (request: Request) => Promise<Response>,
  delayOf: RetryDelay,
  options: RetryAfterOptions = {},
): (request: Request) => Promise<Response> {
  const { retries = 3, maxWaitSeconds = 60, sleep = abortableSleep } = options;
  return async (request) => {
    for (let attempt = 0; ; attempt++) {
      const response = await send(attempt < retries ? request.clone() : request);
      const seconds = attempt < retries ? delayOf(response) : undefined;
      if (seconds === undefined || seconds > maxWaitSeconds) return response;
      await response.body?.cancel();
      await sleep(seconds * 1000, request.signal);
    }
  };
}
