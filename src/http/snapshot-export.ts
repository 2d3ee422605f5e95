// GET /v1/products/export (openapi exportProducts): a store's snapshot as NDJSON
// (catalog/snapshot-export.ts), streamed. The snapshot is read at the database's pace into a
// Spool (memory, then a temporary file) and sent at the client's, so a slow client holds no read
// transaction open (on SQLite it would keep the WAL from being checkpointed; on PostgreSQL it
// would hold a pooled connection and the vacuum horizon). gzip/br are coded as the lines are
// read, before the spool, so a spooled export takes less than a tenth of its size on disk. The ETag
// names the snapshot (store and feed position), known before the first line: a client holding
// it gets 304 and nothing is read.
import type { ServerResponse } from 'node:http';
import zlib from 'node:zlib';
import type { SnapshotExports, SnapshotHead } from '../catalog/snapshot-export.js';
import type { Config } from '../config.js';
import { createLogger } from '../operations/log.js';
import { requestLog } from './access-log.js';
import { CLIENT_CLOSED_REQUEST } from './client-abort.js';
import type { PublicEnv } from './auth.js';
import type { DocumentedHandler, DocumentedResponse } from './documented-responses.js';
import type { routes } from '../generated/public-routes.js';
import { negotiateCoding, type ContentCoding } from './compression.js';
import { etagDigest, etagMatches, etagOf } from './conditional.js';
import { Spool } from './spool.js';
import type { SparseFields } from '../catalog/sparse-fields.js';
import { SpoolBudget } from './spool-budget.js';
import { Slots } from '../shared/slots.js';

/** For an app assembled without the access log. */
const fallbackLogger = createLogger({ logLevel: 'error' });

// The levels compression.ts chose for pages (the least CPU per saved byte within 1.25x
// of gzip 6 and brotli 4), with brotli's largest window, as suits one long body.
const encoderFor = (coding: ContentCoding): zlib.Gzip | zlib.BrotliCompress =>
  coding === 'br'
    ? zlib.createBrotliCompress({
        params: {
          [zlib.constants.BROTLI_PARAM_QUALITY]: 3,
          [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
          [zlib.constants.BROTLI_PARAM_LGWIN]: 22,
        },
      })
    : zlib.createGzip({ level: 3 });

/** The strong validator of a snapshot: what it is (the store, the merchant's feed position) names its bytes. */
export function snapshotEtag({ store, cursor }: SnapshotHead, coding: ContentCoding | undefined, fields?: SparseFields): string {
  // The fields (when some are left out) are part of what the bytes are.
  const sparse = fields ? `\nfields=${fields.key}` : '';
  return etagOf(
    etagDigest(Buffer.from(`products-export/1\n${store.id}\n${store.slug}\n${cursor.at}\n${cursor.id}${sparse}`, 'utf8')),
    coding,
  );
}

/**
 * The handler of exportProducts over the process's snapshot exports: exports in flight capped per
 * key, per merchant and per process (shared/slots.ts), their temporary files by the spool budget.
 */
export function productExport(exports: SnapshotExports, settings: Config['exports']) {
  const inFlight = new Slots(settings, 'exports in flight');
  const spoolBudget = new SpoolBudget({ perMerchant: settings.spoolBytesPerMerchant, perProcess: settings.spoolBytesPerProcess });

  type ExportRoute = typeof routes.exportProducts;
  return async (
    c: Parameters<DocumentedHandler<ExportRoute, PublicEnv>>[0],
    slug: string | undefined,
    ifNoneMatch: string | undefined,
    fields?: SparseFields,
  ): Promise<DocumentedResponse<ExportRoute>> => {
    // HEAD (Hono answers it with the GET handler's headers and drops its body): the snapshot's
    // headers only, nothing read past them, so it holds no spool and takes no export slot.
    const headOnly = c.req.method === 'HEAD';
    const holder = { keyId: c.var.apiKeyId, merchantId: c.var.merchantId };
    let release = () => {};
    if (!headOnly) {
      spoolBudget.admit(holder.merchantId);
      release = inFlight.take(holder);
    }
    const coding = negotiateCoding(c.req.header('Accept-Encoding'));
    const spool = new Spool(settings.memoryBytes, settings.spoolDir, spoolBudget.account(holder.merchantId));
    let encoder: zlib.Gzip | zlib.BrotliCompress | undefined;
    let answer: { head: SnapshotHead; etag: string; notModified: boolean } | undefined;
    let begun!: () => void;
    const headKnown = new Promise<void>((resolve) => {
      begun = resolve;
    });

    // The client leaving ends the read: while it waits for its turn or before its headers (the
    // request's signal), or once the body is being sent (the spool's, when the stream is cancelled).
    const run = exports.export(
      c.var.merchantId,
      slug,
      {
        begin(head) {
          const etag = snapshotEtag(head, coding, fields);
          const notModified = etagMatches(ifNoneMatch, etag);
          answer = { head, etag, notModified };
          if (!notModified && !headOnly && coding) {
            encoder = encoderFor(coding);
            encoder.on('data', (chunk: Buffer) => spool.push(chunk));
            encoder.on('error', (error) => spool.fail(error));
          }
          begun();
          return !notModified && !headOnly;
        },
        async write(stored) {
          // Cut down as read (the trailer line is kept whole), so the spool and the coder see only what is sent.
          const lines = fields ? fields.project(stored) : stored;
          // The spool budget full: the snapshot waits until bytes are taken (or the client is cut off).
          await spool.room();
          if (!encoder) return spool.push(lines);
          // The coder's own backpressure: it codes in the threadpool, at its pace.
          if (!encoder.write(lines)) await new Promise<void>((resolve) => encoder!.once('drain', resolve));
        },
      },
      AbortSignal.any([spool.signal, c.req.raw.signal]),
    );

    try {
      await Promise.race([headKnown, run]);
    } catch (error) {
      release();
      if (c.req.raw.signal.aborted) {
        // Gone while it waited for its turn: nobody to answer (counted as 499, as renderError does).
        requestLog(c)?.info({ method: c.req.method, path: c.req.path }, 'client closed the request before it was answered');
        return new Response(null, { status: CLIENT_CLOSED_REQUEST }) as unknown as DocumentedResponse<ExportRoute>;
      }
      // Before the first line (store_not_found, a database error): an ordinary error response.
      throw error;
    }
    const { head, etag, notModified } = answer!;
    const headers = {
      'Content-Type': 'application/x-ndjson',
      ETag: etag,
      'X-Next-Since': head.cursor.at,
      'X-Next-Id': String(head.cursor.id),
      ...(coding ? { 'Content-Encoding': coding } : {}),
    };
    if (notModified || headOnly) {
      release();
      await run;
      return notModified ? c.body(null, 304, { ETag: etag }) : (c.body(null, 200, headers) as unknown as DocumentedResponse<ExportRoute>);
    }

    const log = requestLog(c) ?? fallbackLogger;
    // A client that stops taking bytes would keep its spool (memory, a file) and its slot for as
    // long as its connection lives: past the stall time-out the connection is closed, the export
    // cut short (no trailer), and the spool released as for a client that left.
    const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
    const body = spool.stream();
    const stallCheck = setInterval(
      () => {
        if (spool.stalledFor() < settings.stallTimeoutMs) return;
        log.info(
          { path: c.req.path, stalled_ms: Math.round(spool.stalledFor()) },
          'snapshot export cut off: its client took nothing for the stall time-out',
        );
        clearInterval(stallCheck);
        outgoing?.destroy();
      },
      Math.max(25, settings.stallTimeoutMs / 4),
    );
    stallCheck.unref();
    void spool.finished.then(() => {
      clearInterval(stallCheck);
      release();
    });
    run
      .then(async () => {
        if (encoder) {
          const ended = new Promise<void>((resolve) => encoder!.once('end', resolve));
          encoder.end();
          await ended;
        }
        spool.end();
      })
      .catch((error: unknown) => {
        encoder?.destroy();
        spool.fail(error);
        // The client going away ends the read; anything else is the service's error, after the
        // headers: the response is cut short without its trailer, which tells the client.
        if (!spool.signal.aborted && !c.req.raw.signal.aborted)
          log.error({ err: error, path: c.req.path }, 'snapshot export failed after its first line');
      });

    const response = c.body(body, 200, headers);
    // @hono/zod-openapi types JSON and text/plain bodies only (an application/x-ndjson 200 is
    // `never` to it); each line is checked against the document's line schema by the contract
    // harness (test/support/contract.ts) instead.
    return response as unknown as DocumentedResponse<ExportRoute>;
  };
}
