// The change feed as a stream (`GET /v1/changes` with `Accept: text/event-stream`) read with fetch,
// so the key goes in the Authorization header: a browser's EventSource cannot send one, and a key in
// the URL ends up in logs and histories (the service refuses it: 401). Runs wherever fetch streams a
// response body (browsers, Node 18+, Deno), and reconnects as EventSource does: after the stream's
// `retry:`, with the last event's id as `Last-Event-ID`.
import { CatalogApiError } from './errors.js';
import { sleep, type ChangeCursor, type ChangeWindow } from './changes.js';
import type { StoreOption } from './reads.js';
import type { CatalogClient, ChangePage } from './types.js';

export interface StreamChangesOptions extends StoreOption {
  /** Where to start; omitted, the feed starts at the beginning of the retained history (cursor rule 3). */
  cursor?: ChangeCursor;
  /** Aborting ends the stream and rejects the iteration with the signal's reason. */
  signal?: AbortSignal;
  /** The wait before reconnecting until the stream has sent its own `retry:` (the service sends 5000 by default). Default 5000 ms. */
  retryMs?: number;
}

/** One block of a Server-Sent Events stream (the fields this service sends). */
interface StreamEvent {
  id?: string;
  data?: string;
  retry?: number;
}

/**
 * The windows of a store's change feed after a cursor, each once, in order, as the service streams
 * them: windows back to back while behind, then each change as it is recorded. It never ends by
 * itself: when the stream closes (the service shuts down or closes a client that stopped reading, a
 * proxy cuts it) or the network fails, it waits the stream's `retry:` and reconnects with
 * `Last-Event-ID` (the cursor after the last window), which resumes exactly. An error answer
 * throws CatalogApiError (401 when the key was revoked, 410 `cursor_expired`: resync, 429 when the
 * key holds its cap of live connections); a 503 is retried. Persist `window.cursor` after
 * applying a window, as with pollChanges.
 *
 * @example
 * for await (const window of streamChanges(client, { store: 'de', cursor, signal })) {
 *   render(window.changes);
 *   saveCursor(window.cursor);
 * }
 */
export async function* streamChanges(
  client: CatalogClient,
  { store, cursor, signal, retryMs = 5000 }: StreamChangesOptions = {},
): AsyncGenerator<ChangeWindow, never, undefined> {
  let lastEventId = cursor ? `${cursor.since}/${cursor.since_id}` : undefined;
  for (;;) {
    signal?.throwIfAborted();
    let body: ReadableStream<Uint8Array> | undefined;
    try {
      const { data, error, response } = await client.GET('/v1/changes', {
        params: { query: { store } },
        headers: { Accept: 'text/event-stream', ...(lastEventId === undefined ? {} : { 'Last-Event-ID': lastEventId }) },
        parseAs: 'stream',
        signal,
      });
      if (response.status === 503) await response.body?.cancel();
      else if (!response.ok) throw CatalogApiError.from(response, typeof error === 'string' ? parseJson(error) : error);
      else body = data as ReadableStream<Uint8Array>;
    } catch (error) {
      // A network failure is reconnected; an abort or an error answer ends the iteration.
      if (signal?.aborted || error instanceof CatalogApiError || !(error instanceof TypeError)) throw error;
    }
    if (body) {
      try {
        for await (const event of serverSentEvents(body, signal)) {
          if (event.retry !== undefined) retryMs = event.retry;
          if (event.id !== undefined) lastEventId = event.id;
          if (event.data === undefined) continue;
          const page = JSON.parse(event.data) as ChangePage;
          store = page.store;
          yield { store: page.store, changes: page.changes, cursor: { since: page.next_since, since_id: page.next_id } };
        }
      } catch (error) {
        if (signal?.aborted) throw error;
        // The connection failed mid-stream: reconnect from the last event, as after a closed stream.
      }
    }
    await sleep(retryMs, signal);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The events of a text/event-stream body (the WHATWG parsing rules for the fields this service sends). */
async function* serverSentEvents(body: ReadableStream<Uint8Array>, signal: AbortSignal | undefined): AsyncGenerator<StreamEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const cancel = () => void reader.cancel().catch(() => undefined);
  signal?.addEventListener('abort', cancel, { once: true });
  let buffer = '';
  let event: StreamEvent = {};
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(buffer[end] === '\r' && buffer[end + 1] === '\n' ? end + 2 : end + 1);
        if (line === '') {
          if (event.data !== undefined || event.retry !== undefined || event.id !== undefined) yield event;
          event = {};
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + (line[colon + 1] === ' ' ? 2 : 1));
        if (field === 'data') event.data = event.data === undefined ? value : `${event.data}\n${value}`;
        else if (field === 'id' && !value.includes('\0')) event.id = value;
        else if (field === 'retry' && /^[0-9]+$/.test(value)) event.retry = Number(value);
      }
    }
  } finally {
    signal?.removeEventListener('abort', cancel);
    cancel();
  }
}
