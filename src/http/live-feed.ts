// The change feed as Server-Sent Events (openapi/paths/v1_changes.yaml, "Waiting for
// the next change"): `Accept: text/event-stream` turns `GET /v1/changes` into a stream of its
// windows, each an event whose `id` is the cursor after it, resumed exactly by `Last-Event-ID`
// (after the `retry:` the stream opens with).
// The windows come from the domain's LiveStream (changes/live.ts); this module only frames them,
// sends heartbeats as comments, and takes a rate-limit token for every event after the first.
import type { ServerResponse } from 'node:http';
import type { ChangePage } from '../changes/feed.js';
import type { LiveStream } from '../changes/live.js';
import type { Logger } from '../operations/log.js';
import type { KeyHold } from '../tenancy/held-api-keys.js';
import { codeBody, type ContentCoding } from './compression.js';
import type { DirectBody } from './direct-answer.js';
import { watchForStall } from './stalled-client.js';
import type { TokenBucketLimiter } from './rate-limit.js';
import { closeNonReader, unsentRoom } from './unsent-bytes.js';

const encoder = new TextEncoder();
/** The stream's first bytes: a comment, and how long a client waits before it reconnects (CPS_FEED_STREAM_RETRY_MS). */
const opened = (retryMs: number) => encoder.encode(`: connected\nretry: ${retryMs}\n\n`);
const HEARTBEAT = encoder.encode(': heartbeat\n\n');

/**
 * True when the request asks for the stream: its Accept prefers text/event-stream, named as such,
 * to JSON (EventSource sends `Accept: text/event-stream`). A client that lists both alike (a
 * generic one listing every documented type) gets the JSON window, the operation's default.
 */
export function wantsEventStream(accept: string | undefined): boolean {
  if (!accept) return false;
  let stream = 0;
  let json = 0;
  for (const part of accept.split(',')) {
    const [type, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2)) || 0;
    const name = type!.trim();
    if (name === 'text/event-stream') stream = Math.max(stream, weight);
    else if (name === 'application/json' || name === 'application/*' || name === '*/*') json = Math.max(json, weight);
  }
  return stream > json;
}

/** An event's id: the cursor after its window (the Last-Event-ID parameter's form). */
export const eventIdOf = (page: Pick<ChangePage, 'next_since' | 'next_id'>) => `${page.next_since}/${page.next_id}`;

/** One window as an event: `id` the cursor after it, `data` the window's JSON on one line. */
export function changeEvent(page: ChangePage): string {
  return `id: ${eventIdOf(page)}\ndata: ${changePageJson(page)}\n\n`;
}

// Every client a look answers gets the same window object (changes/live.ts): it is serialized once
// for all of them, not once per client (a wake-up of 1,000 clients).
const pageJson = new WeakMap<ChangePage, string>();
const pageEvent = new WeakMap<ChangePage, Uint8Array>();

const pageCoded = new WeakMap<ChangePage, Map<ContentCoding, Promise<Uint8Array>>>();

/** A long-poll's answer (http/direct-answer.ts): the window's JSON, and coded, each made once per window object. */
export function changePageBody(page: ChangePage): DirectBody {
  return {
    json: changePageJson(page),
    coded(coding) {
      let codings = pageCoded.get(page);
      if (!codings) pageCoded.set(page, (codings = new Map<ContentCoding, Promise<Uint8Array>>()));
      let coded = codings.get(coding);
      if (!coded) codings.set(coding, (coded = codeBody(encoder.encode(changePageJson(page)), coding)));
      return coded;
    },
  };
}

/** The window's JSON (what a long-poll answers), serialized once per window object. */
export function changePageJson(page: ChangePage): string {
  let json = pageJson.get(page);
  if (json === undefined) pageJson.set(page, (json = JSON.stringify(page)));
  return json;
}

/** The window's event bytes, encoded once per window object. */
function changeEventBytes(page: ChangePage): Uint8Array {
  let bytes = pageEvent.get(page);
  if (bytes === undefined) pageEvent.set(page, (bytes = encoder.encode(changeEvent(page))));
  return bytes;
}

export interface EventStreamOptions {
  /** The key's bucket: every event after the first takes a request from it (the first came with the request). */
  limiter?: TokenBucketLimiter;
  keyId: number;
  log?: Logger;
  /**
   * The connection, the bytes that may wait in the process for it (CPS_UNSENT_BYTES_MAX) and how long
   * it may take none of them (CPS_FEED_STALL_TIMEOUT_MS): a client that does not read is closed.
   */
  unsent?: { outgoing: ServerResponse | undefined; max: number; stallMs?: number };
  /** The stream's hold on its key (tenancy/held-api-keys.ts): the body ends once the key is revoked, and lets go when it ends. */
  hold?: KeyHold;
  /** The `retry:` sent first (CPS_FEED_STREAM_RETRY_MS): how long a client waits to reconnect once the stream ends. */
  retryMs?: number;
}

/** CPS_FEED_STREAM_RETRY_MS's default. */
export const STREAM_RETRY_MS = 5000;

/**
 * The response body: a comment at once (the headers go out with it), then each window of the
 * stream as an event, pulled one at a time as the client reads (a slow reader gets fewer, larger
 * windows, never a queue), and heartbeats. It ends when the LiveStream does (shutdown) or fails,
 * or when its key is revoked; the client going away closes the LiveStream.
 */
export function changeEventStream(
  stream: LiveStream,
  { limiter, keyId, log, unsent, hold, retryMs = STREAM_RETRY_MS }: EventStreamOptions,
): ReadableStream<Uint8Array> {
  let first = true;
  /** Aborted once the body ends or the client cancels it: nothing is enqueued after that. */
  const stopped = new AbortController();
  let unwatch = () => {};
  const end = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    if (stopped.signal.aborted) return;
    unwatch();
    stopped.abort();
    stream.close();
    hold?.release();
    controller.close();
  };
  /** Enqueues the bytes, or closes a client that has not taken what came before (http/unsent-bytes.ts). */
  const send = (controller: ReadableStreamDefaultController<Uint8Array>, bytes: Uint8Array) => {
    if (unsent && !unsentRoom(unsent.outgoing, bytes.length, unsent.max)) {
      log?.info(
        { store_id: stream.store.id, unsent_bytes: unsent.outgoing?.writableLength },
        'live feed: a stream whose client does not read was closed',
      );
      closeNonReader(unsent.outgoing);
      return end(controller);
    }
    controller.enqueue(bytes);
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(opened(retryMs));
      if (unsent?.outgoing && unsent.stallMs !== undefined) {
        const outgoing = unsent.outgoing;
        unwatch = watchForStall(outgoing, unsent.stallMs, () => {
          log?.info(
            { store_id: stream.store.id, unsent_bytes: outgoing.writableLength },
            'live feed: a stream whose client stopped reading was closed',
          );
          closeNonReader(outgoing);
          end(controller);
        });
      }
      // The key revoked: the body closes now, whatever the stream waits for (a client reconnecting gets 401).
      if (hold?.signal.aborted) end(controller);
      else hold?.signal.addEventListener('abort', () => end(controller), { once: true });
    },
    async pull(controller) {
      try {
        const next = await stream.next();
        if (stopped.signal.aborted) return;
        if (next === undefined) return end(controller);
        if (next === 'heartbeat') return send(controller, HEARTBEAT);
        if (!first && limiter && !(await takeToken(limiter, keyId, stopped.signal))) return end(controller);
        if (stopped.signal.aborted) return;
        first = false;
        send(controller, changeEventBytes(next));
      } catch (error) {
        if (stopped.signal.aborted) return;
        // The client reconnects with Last-Event-ID and gets the error (a 410, say) as a response.
        log?.warn({ err: error, store_id: stream.store.id }, 'live feed: a stream ended on an error');
        end(controller);
      }
    },
    cancel() {
      unwatch();
      stopped.abort();
      stream.close();
      hold?.release();
    },
  });
}

/** Waits until the key's bucket gives a token (a stream holds its event meanwhile); false when stopped first. */
async function takeToken(limiter: TokenBucketLimiter, keyId: number, signal: AbortSignal): Promise<boolean> {
  for (;;) {
    if (signal.aborted) return false;
    const decision = limiter.take(keyId);
    if (decision.allowed) return true;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, decision.retryAfterSeconds * 1000);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
