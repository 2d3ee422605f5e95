// Every setting, declared once: its variable, default, accepted values and description.
// `SETTINGS` is a zod schema over the environment: src/config.ts places its values in the typed
// `Config`, and scripts/generate/generate.ts writes the configuration table of docs/configuration.md from it, in this order.
// A value outside its bounds refuses the start, naming the variable, the value and the bounds (never
// a silent clamp); an empty variable is an unset one. Defaults are the values of docs/decisions.md.
import os from 'node:os';
import { z } from 'zod';
import { CHANGES_MAX_ITEMS, WEBHOOK_PRODUCT_IDS_MAX_ITEMS } from '../generated/public-limits.js';
import { addressRange } from '../shared/address-ranges.js';

/** The values a setting accepts. */
export type Accepts =
  | { kind: 'integer'; min: number; max?: number }
  | { kind: 'flag' }
  | { kind: 'oneOf'; values: readonly string[] }
  /** Text of any kind (`what` says what it names), or comma-separated entries. */
  | { kind: 'text' | 'list'; what: string };

/** What the configuration table (docs/configuration.md) says of a setting. */
export interface SettingDoc {
  /** The default as the table shows it. */
  default: string;
  accepts: Accepts;
  /** What it does, for operators. */
  description: string;
}

/** `1 to 1000`, `` `true` or `false` ``: the configuration table's words for what a setting accepts. */
export function acceptedValues(accepts: Accepts): string {
  switch (accepts.kind) {
    case 'integer':
      return accepts.max === undefined ? `${accepts.min} or more` : `${accepts.min} to ${accepts.max}`;
    case 'flag':
      return '`true` or `false`';
    case 'oneOf':
      return accepts.values.map((value) => `\`${value}\``).join(', ');
    case 'text':
      return accepts.what;
    case 'list':
      return `${accepts.what}, comma-separated`;
  }
}

/** Each setting's schema to its row of the configuration table. */
export const SETTING_DOCS = z.registry<SettingDoc>();

interface Declared<T> {
  default: T;
  description: string;
  /** The default as the configuration table shows it, when its value does not say it (`unset`, a derived value). */
  shownDefault?: string;
}

/** One variable: `value` parses a set variable; unset or empty, the default stands. */
function setting<T>(value: z.ZodType<T, string>, declared: Declared<T>, accepts: Accepts, shown: string) {
  return (
    z
      .string()
      .optional()
      .transform((raw) => (raw === '' ? undefined : raw))
      .pipe(value.optional())
      // A copy: a list default is never shared between two configurations.
      .transform((parsed): T => (parsed === undefined ? structuredClone(declared.default) : parsed))
      .register(SETTING_DOCS, { default: declared.shownDefault ?? shown, accepts, description: declared.description })
  );
}

const KIB = 1024;
const MIB = 1024 * KIB;

/** `1048576` (1 MiB): a byte count of at least 64 KiB also in KiB or MiB. */
function shownBytes(bytes: number): string {
  if (bytes >= MIB && bytes % MIB === 0) return `\`${bytes}\` (${bytes / MIB} MiB)`;
  if (bytes >= 64 * KIB && bytes % KIB === 0) return `\`${bytes}\` (${bytes / KIB} KiB)`;
  return `\`${bytes}\``;
}

/** A whole number from `min` (0 unless given) to `max` (none unless given); a null default: unset means none. */
function integer<T extends number | null = number>(declared: Declared<T> & { min?: number; max?: number; bytes?: boolean }) {
  const { min = 0, max } = declared;
  const expected =
    max === undefined
      ? min === 0
        ? 'a non-negative integer'
        : `an integer of at least ${min}`
      : min === 0
        ? `a non-negative integer up to ${max}`
        : `an integer from ${min} to ${max}`;
  const bounds = max === undefined ? `at least ${min}` : min === 0 ? `at most ${max}` : `from ${min} to ${max}`;
  const outOfBounds = { error: (issue: { input?: unknown }) => `must be ${bounds}, got ${String(issue.input)}` };
  let number = z.number().min(min, outOfBounds);
  if (max !== undefined) number = number.max(max, outOfBounds);
  const value = z
    .string()
    .regex(/^[0-9]+$/, { error: (issue) => `must be ${expected}, got "${String(issue.input)}"` })
    .transform(Number)
    .pipe(number);
  const shown = declared.bytes && declared.default !== null ? shownBytes(declared.default) : `\`${declared.default}\``;
  return setting<number | T>(value, declared, { kind: 'integer', min, max }, shown);
}

/** `true` or `false` (also `1`/`0`, `yes`/`no`, in any case). */
function flag(declared: Declared<boolean>) {
  const value = z.stringbool({
    truthy: ['1', 'true', 'yes'],
    falsy: ['0', 'false', 'no'],
    case: 'insensitive',
    error: (issue) => `must be true or false, got "${String(issue.input)}"`,
  });
  return setting(value, declared, { kind: 'flag' }, `\`${declared.default}\``);
}

/** One of `values`. */
function oneOf<const T extends readonly [string, ...string[]]>(values: T, declared: Declared<T[number]>) {
  const value = z.enum(values, { error: (issue) => `must be one of ${values.join(', ')}, got "${String(issue.input)}"` });
  return setting<T[number]>(value, declared, { kind: 'oneOf', values }, `\`${declared.default}\``);
}

/** Any text (a path, a token, an address): `accepts` says which. */
function text<T extends string | null>(declared: Declared<T> & { accepts: string }) {
  return setting<string | T>(z.string(), declared, { kind: 'text', what: declared.accepts }, `\`${declared.default}\``);
}

/** A comma-separated list of `item`s, each trimmed; with `skipEmpty`, empty entries are left out. */
function list<T>(item: z.ZodType<T, string>, declared: Declared<T[]> & { accepts: string; skipEmpty?: boolean }) {
  const value = z
    .string()
    .transform((raw) =>
      raw
        .split(',')
        .map((entry) => entry.trim())
        .filter((entry) => !declared.skipEmpty || entry !== ''),
    )
    .pipe(z.array(item));
  return setting(value, declared, { kind: 'list', what: declared.accepts }, `\`${declared.default.join(',')}\``);
}

const wholeSeconds = z
  .string()
  .regex(/^\d+$/, { error: (issue) => `must list whole seconds, got "${String(issue.input)}"` })
  .transform(Number);

/** A PostgreSQL URL; an error shows no more of a bad one than its scheme (the rest may hold a password). */
const postgresUrl = z.string().regex(/^postgres(ql)?:\/\//, {
  error: (issue) => {
    const input = String(issue.input);
    const shown = input.includes(':') ? `"${input.slice(0, input.indexOf(':') + 1)}…"` : 'a value without a scheme';
    return `must be a postgres:// or postgresql:// URL (unset it to use the SQLite file at CPS_DB_PATH), got ${shown}`;
  },
});

const proxyAddress = z.string().refine((entry) => addressRange(entry) !== undefined, {
  error: (issue) => `must list IP addresses or CIDR ranges (10.0.0.0/8, 2001:db8::/32), got "${String(issue.input)}"`,
});

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The longest a long-poll of the change feed may be configured to wait (openapi: the `wait` parameter). */
export const MAX_FEED_WAIT_SECONDS = 300;

/** The environment variables, in the configuration table's order. */
export const SETTINGS = z.object({
  CPS_PORT: integer({ default: 8080, max: 65535, description: 'HTTP port' }),
  CPS_HOST: text({ default: '127.0.0.1', accepts: 'an address', description: 'interface to bind' }),
  CPS_DB_PATH: text({ default: './data/catalog.db', accepts: 'a file path', description: 'SQLite file (folder created when missing)' }),
  CPS_DATABASE_URL: setting<string | null>(
    postgresUrl,
    {
      default: null,
      shownDefault: 'unset',
      description:
        '`postgres://…`: the database is PostgreSQL instead of the SQLite file, for every command (migrations applied at start under an advisory lock; `backup` points to `pg_dump`)',
    },
    { kind: 'text', what: 'a `postgres://` or `postgresql://` URL' },
    'unset',
  ),
  CPS_DB_POOL_SIZE: integer({
    default: 10,
    min: 1,
    description:
      'connections to PostgreSQL each process (and each of its worker threads) keeps at most; on SQLite, the read connections for snapshots (a page, a feed window, an export) each keeps at most, opened as needed (about 2 MiB and 2 file descriptors each): more snapshots at once wait for one, so a burst of reads never opens a connection per request',
  }),
  CPS_DB_POOL_IDLE_MS: integer({
    default: 60_000,
    min: 1000,
    description:
      'on PostgreSQL, how long a pooled connection may stay idle before it is closed: longer than the periodic looks (publish runs every 30 s), so they and bursts a minute apart reuse connections instead of starting backends (an ended backend that had worked costs PostgreSQL ~15 ms of CPU)',
  }),
  CPS_ADMIN_TOKEN: text({
    default: null,
    shownDefault: 'random per start, printed',
    accepts: 'any text',
    description: 'Bearer token of the admin API',
  }),
  CPS_PUBLIC_BASE_URL: text({
    default: null,
    shownDefault: '`http://{host}:{port}`',
    accepts: 'a URL',
    description:
      "base URL printed in examples and in panel links; when set, the panel accepts forms from this origin only (unset, also from the origin the request's `Host` names): set it in production",
  }),
  CPS_DEMO_ON_EMPTY: flag({ default: true, description: 'build the demo catalog when the database has no merchant' }),
  CPS_DEMO_PRODUCTS: integer({ default: 500, description: 'products in that demo catalog' }),
  CPS_ADMIN_BODY_BYTES: integer({ default: 1 * MIB, bytes: true, description: 'largest admin JSON body (413 above)' }),
  CPS_ADMIN_MAX_JSON_DEPTH: integer({
    default: 32,
    min: 1,
    description: 'deepest nesting of arrays and objects an admin body (or import line) may have (400 above)',
  }),
  CPS_IMPORT_BODY_BYTES: integer({ default: 64 * MIB, bytes: true, description: 'largest NDJSON import (413 above)' }),
  // The bounds of one product's source (catalog/product-limits.ts), each at least 1.
  CPS_MAX_PRODUCT_BYTES: integer({
    default: 512 * KIB,
    min: 1,
    bytes: true,
    description:
      'largest product source document, in bytes of its JSON as stored (defaults filled in); every payload of the product is built from it (400 above; see "Product limits" below)',
  }),
  CPS_MAX_PRODUCT_LOCALES: integer({
    default: 100,
    min: 1,
    description: '`content` entries (locales and languages) of one product (400 above)',
  }),
  CPS_MAX_PRODUCT_IMAGES: integer({ default: 100, min: 1, description: '`images` of one product (400 above)' }),
  CPS_MAX_PRODUCT_OFFERS: integer({ default: 100, min: 1, description: '`offers` of one product (400 above)' }),
  CPS_MAX_PRODUCT_SUPPLIER_ATTRIBUTES: integer({ default: 2000, min: 1, description: '`supplier_attributes` of one product (400 above)' }),
  CPS_MAX_PRODUCT_OVERRIDES: integer({ default: 1000, min: 1, description: '`overrides` of one product (400 above)' }),
  CPS_PUBLISH_CHUNK: integer({
    default: 500,
    min: 1,
    description:
      'products read, resolved and written per transaction of a merchant-wide re-publish (a publish run); import lines per transaction',
  }),
  CPS_PUBLISH_RUN_LEASE_MS: integer({
    default: 60_000,
    min: 100,
    description:
      "a publish run's process holds it this long past each chunk; a run its process left (a crash) is resumed by another `serve` or `worker`, which look at start and every half of this",
  }),
  CPS_IMPORT_STALLED_SECONDS: integer({
    default: 60,
    min: 4,
    description:
      'an import still checking its file whose progress has not been written for this long was left by its process (killed, crashed): the next `serve` or `worker` to look (at start, then with the publish runs) ends it as `interrupted`, with nothing of it applied; a live process writes the progress of each import it checks every quarter of this, however slowly the file arrives',
  }),
  CPS_PRODUCT_LIST_SCAN: integer({
    default: 5000,
    min: 200,
    description:
      "products one page of the admin API's product list (`GET /admin/v1/merchants/{id}/products`) looks at, at most, matching its filters or not: a filter few products match answers short pages, each with `next_after` to go on from, and no request costs the size of the catalog",
  }),
  CPS_WRITE_SLICE_MS: integer({
    default: 5,
    min: 1,
    description:
      'a merchant-wide write (re-pricing, import, publishing a store) holds the event loop about this long at most before reads get their turn',
  }),
  CPS_DB_LOCK_TIMEOUT_MS: integer({
    default: 30_000,
    description:
      "a write waits this long for another process's write lock on the SQLite file (waiting does not block the process), or a PostgreSQL statement for a lock, before it fails",
  }),
  CPS_WAL_CHECKPOINT_INTERVAL_MS: integer({
    default: 1000,
    min: 10,
    description: 'how often, at most, the SQLite WAL is copied back into the database file, in a background thread, after writes',
  }),
  // spec 4.4: the feed's window; at most what one response may carry (openapi: ChangePage.changes maxItems).
  CPS_FEED_WINDOW: integer({
    default: CHANGES_MAX_ITEMS,
    min: 1,
    max: CHANGES_MAX_ITEMS,
    description: 'recorded changes one `GET /v1/changes` response covers at most',
  }),
  // docs/decisions.md#changes-and-the-feed: history is kept at least 30 days.
  CPS_CHANGE_RETENTION_DAYS: integer({
    default: 30,
    min: 30,
    description: 'feed history kept at least this long; an older cursor answers 410',
  }),
  CPS_CHANGE_PRUNE_INTERVAL_SECONDS: integer({
    default: 3600,
    min: 1,
    description: 'how often `serve` deletes changes past the retention (in its worker thread with `CPS_WORKERS=thread`)',
  }),
  CPS_CHANGE_PRUNE_BATCH: integer({
    default: 1000,
    min: 1,
    description: 'changes deleted per transaction while pruning, oldest first from an index; reads and other work run between two batches',
  }),
  CPS_IDEMPOTENCY_HOURS: integer({
    default: 24,
    min: 1,
    max: 24 * 30,
    description:
      'how long the admin API keeps an `Idempotency-Key` with its first answer: a retry with the same key and request within it replays that answer; the key is deleted after it (with the changes past their retention)',
  }),
  // 100 products (~75 KB of lines at 100,000 products) keep a step near a millisecond: another
  // merchant's request waits at most about that behind a running export (bench:exhaust).
  CPS_EXPORT_STEP_ROWS: integer({
    default: 100,
    min: 1,
    description:
      'products a snapshot export (`GET /v1/products/export`) reads per statement of its snapshot; the event loop is free between two',
  }),
  CPS_EXPORT_MEMORY_BYTES: integer({
    default: 8 * MIB,
    bytes: true,
    description:
      "bytes of an export read ahead of its client that are kept in memory; the rest waits in a temporary file, so the snapshot ends at the database's pace whatever the client's (`0`: everything not yet sent goes to the file)",
  }),
  CPS_EXPORT_SPOOL_DIR: text({
    default: os.tmpdir(),
    shownDefault: 'the OS temporary folder',
    accepts: 'a folder path',
    description: 'where those files are made (mode 0600, each removed from the folder as soon as it is opened)',
  }),
  CPS_EXPORT_CONCURRENCY: integer({
    default: 2,
    min: 1,
    description: 'snapshots one process reads at once (each holds a database connection while it is read); more wait their turn',
  }),
  CPS_EXPORT_CONCURRENCY_PER_MERCHANT: integer({
    default: 1,
    min: 1,
    description:
      "of those, snapshots of one merchant read at once; its other exports wait their turn, so a merchant whose clients do not read (its snapshots then wait for room in its temporary files) never holds every turn, and other merchants' exports go on",
  }),
  CPS_EXPORTS_PER_KEY: integer({
    default: 2,
    min: 1,
    description:
      'exports one API key may have in flight at once, from the request to the last byte sent; one more answers `429 rate_limited` with `Retry-After: 1`',
  }),
  // Fairness: a merchant's share is a quarter of the process's, whatever its number of keys.
  CPS_EXPORTS_PER_MERCHANT: integer({
    default: 4,
    min: 1,
    description:
      "exports one merchant's API keys, together, may have in flight at once in one process; one more answers `429 rate_limited` with `Retry-After: 1`",
  }),
  CPS_EXPORTS_PER_PROCESS: integer({
    default: 16,
    min: 1,
    description:
      'exports one process has in flight at once, over every merchant; one more answers `503 service_unavailable` with `Retry-After: 1`. Their memory is at most this many times `CPS_EXPORT_MEMORY_BYTES` (128 MiB by default)',
  }),
  CPS_EXPORT_SPOOL_BYTES_PER_MERCHANT: integer({
    default: 128 * MIB,
    bytes: true,
    min: 1,
    description:
      "bytes of one merchant's exports waiting in temporary files at once in one process: while they are full, a new export of the merchant answers `429 rate_limited` and a running one stops reading its snapshot until its client (or another) takes bytes",
  }),
  CPS_EXPORT_SPOOL_BYTES_PER_PROCESS: integer({
    default: 512 * MIB,
    bytes: true,
    min: 1,
    description:
      "bytes of every export's temporary file together in one process: while they are full, a new export answers `503 service_unavailable` and a running one stops reading until bytes are taken (a stalled client is cut off after `CPS_EXPORT_STALL_TIMEOUT_MS`)",
  }),
  CPS_EXPORT_STALL_TIMEOUT_MS: integer({
    default: 60_000,
    min: 100,
    description:
      'an export whose client takes none of the bytes waiting for it for this long is cut off: its connection is closed without the trailer line, and its memory, temporary file and slot are freed',
  }),
  CPS_FEED_MAX_WAIT_SECONDS: integer({
    default: 30,
    max: MAX_FEED_WAIT_SECONDS,
    description:
      'the longest a `GET /v1/changes?wait=N` long-poll waits for a change (a larger `wait` is clamped to it; `0`: requests never wait). 30 s stays under the idle time-outs of common load balancers (60 s)',
  }),
  CPS_FEED_HEARTBEAT_SECONDS: integer({
    default: 15,
    min: 1,
    max: 300,
    description:
      'a change-feed stream (`Accept: text/event-stream`) with nothing to send for this long sends a comment line, so proxies keep it open',
  }),
  CPS_FEED_STREAM_RETRY_MS: integer({
    default: 5000,
    min: 100,
    max: 3_600_000,
    description:
      "the `retry:` a change-feed stream sends when it opens: how long a client (`EventSource`, the client package's `streamChanges`) waits before reconnecting once the stream ends, with the last event's `id` as `Last-Event-ID`",
  }),
  CPS_FEED_STALL_TIMEOUT_MS: integer({
    default: 60_000,
    min: 100,
    description:
      "a change-feed stream whose client takes none of the bytes waiting for it for this long is closed: a client that stopped reading no longer holds its connection and what the kernel's send buffer took for it (up to `net.ipv4.tcp_wmem`'s maximum, 4 MiB on Linux)",
  }),
  CPS_FEED_LIVE_PER_KEY: integer({
    default: 20,
    min: 1,
    description:
      'live change-feed connections (long-polls waiting, streams open) one API key may hold at once, per process; one more answers `429 rate_limited`',
  }),
  CPS_FEED_LIVE_PER_MERCHANT: integer({
    default: 100,
    min: 1,
    description:
      "live change-feed connections one merchant's API keys, together, may hold at once in one process (a tenth of the process's: each stream whose client stops reading can hold up to 4 MiB of the kernel's socket memory until `CPS_FEED_STALL_TIMEOUT_MS`); one more answers `429 rate_limited`",
  }),
  CPS_FEED_LIVE_PER_PROCESS: integer({
    default: 1000,
    min: 1,
    description:
      'live change-feed connections one process holds at once, over every merchant; one more answers `503 service_unavailable` with `Retry-After: 5`',
  }),
  CPS_UNSENT_BYTES_MAX: integer({
    default: 256 * KIB,
    bytes: true,
    min: 1024,
    description:
      "bytes waiting in the process for a client that does not read them (past what the kernel's socket buffers took) with its next change-feed event or long-poll answer, at which its connection is reset rather than queue more; while the kernel takes everything, nothing waits",
  }),
  CPS_FEED_LIVE_POLL_MS: integer({
    default: 1000,
    min: 50,
    description:
      "the live feed's fallback: every store with waiting clients is read this often, for writers whose commits wake no one here (another process on the SQLite file, such as a CLI import; a PostgreSQL notification lost while reconnecting)",
  }),
  // A window is at most CPS_FEED_WINDOW changes (~75 bytes each as JSON, kept as the object, its JSON and its event bytes): ~300 KB.
  // A slice near two milliseconds: another merchant's request waits at most about that behind one
  // merchant's live clients, while a thousand small answers still take only a few turns of the loop.
  CPS_FEED_TURN_MS: integer({
    default: 2,
    min: 0,
    max: 1000,
    description:
      "how long the live feed's work (window reads, windows handed to streams and long-polls) runs back to back, merchants in turn, before the event loop turns and other requests run (`0`: it turns after every piece)",
  }),
  CPS_FEED_WINDOW_CACHE: integer({
    default: 32,
    min: 0,
    description:
      'change-feed windows one process keeps for the live clients of a store (a window read is a final range of the feed: changes take their positions in commit order), so streams behind their store read and serialize each window once rather than once each, and a stream whose cursor falls inside a kept window is sent the part after it; at most about 300 KB each at the default `CPS_FEED_WINDOW` (`0`: clients share only reads in flight)',
  }),
  CPS_WEBHOOK_DISPATCHER: flag({
    default: true,
    description: 'run the webhook dispatcher inside `serve` (set `false` when a `worker` runs it)',
  }),
  CPS_WORKERS: oneOf(['thread', 'inline'], {
    default: 'thread',
    description:
      'where `serve` runs its dispatcher and image mirror: `thread`, a worker thread of the same process with its own database connections (the event loop answering requests never runs their statements, re-publishing or coalescing; their deliveries and statement timings show in the same `/metrics`); `inline`, on the serving event loop',
  }),
  CPS_WORKER_NICE: integer({
    default: 10,
    max: 19,
    description:
      "on Linux, the nice value `serve`'s worker threads, and every thread of a `worker` process, add to their own priority: on a busy machine the threads answering requests get the CPU first and the background work (re-publishing, imports, coalescing, deliveries, mirroring) what is left; a `worker` that leads its session (a service unit's, `setsid`) adds it to its session's autogroup too, where the kernel's autogroups weigh each session alike whatever its threads' nice; `0` runs them at the same priority",
  }),
  CPS_WEBHOOK_ALLOW_HOSTS: list(z.string(), {
    default: [],
    shownDefault: 'empty',
    skipEmpty: true,
    accepts: 'host names and IP addresses',
    description: 'hosts exempt from the SSRF guard and allowed over `http://` (e.g. `127.0.0.1,localhost` for local receivers)',
  }),
  CPS_WEBHOOK_TIMEOUT_MS: integer({
    default: 10_000,
    description:
      "per-request time-out of a delivery (connecting and the whole response; time waiting for a connection of the endpoint's own is not counted)",
  }),
  CPS_WEBHOOK_COALESCE_MS: integer({
    default: 2000,
    description:
      'changes per endpoint, event and store are batched this long or up to `CPS_WEBHOOK_BATCH_SIZE` ids; a running dispatcher groups the outbox at most every tenth of this window (at most every 100 ms), however many commits wake it',
  }),
  CPS_WEBHOOK_BATCH_SIZE: integer({
    default: WEBHOOK_PRODUCT_IDS_MAX_ITEMS,
    min: 1,
    max: WEBHOOK_PRODUCT_IDS_MAX_ITEMS,
    description: 'product ids one delivery carries at most (see `CPS_WEBHOOK_COALESCE_MS`)',
  }),
  CPS_WEBHOOK_FULL_PAYLOAD_BYTES: integer({
    default: 256 * 1024,
    min: 4096,
    max: 16 * MIB,
    bytes: true,
    description:
      'largest body of a delivery to an endpoint with `payload: full`: the changed products that would take it beyond this are left out and listed in `products_omitted`',
  }),
  CPS_WEBHOOK_ENDPOINT_CONCURRENCY: integer({
    default: 4,
    min: 1,
    description: "deliveries in flight per endpoint (all processes; also the endpoint's own keep-alive connections)",
  }),
  CPS_WEBHOOK_CONCURRENCY: integer({ default: 32, min: 1, description: 'deliveries in flight overall (per process)' }),
  // A quarter of the default slots: three merchants whose receivers all hang leave a quarter to everyone else.
  CPS_WEBHOOK_MERCHANT_CONCURRENCY: integer({
    default: 8,
    min: 1,
    description:
      "of a process's overall slots, at most this many hold deliveries to one merchant's endpoints: receivers that hang cost their merchant's share, not the other merchants' deliveries",
  }),
  CPS_WEBHOOK_BACKOFF_SECONDS: list(wholeSeconds, {
    default: [30, 120, 600, 3600, 21600],
    accepts: 'whole seconds',
    description: "waits before each retry (±20% jitter); then the delivery is given up. The last step also caps a receiver's `Retry-After`",
  }),
  CPS_WEBHOOK_NOTIFY_AFTER_FAILURES: integer({
    default: 5,
    min: 1,
    description: '"repeated failures": consecutive failed attempts after which the owners are notified, once per streak',
  }),
  CPS_WEBHOOK_RENOTIFY_HOURS: integer({ default: 24, description: 'owners are notified again for one failure streak at most this often' }),
  CPS_WEBHOOK_PAUSE_AFTER_FAILURES: integer({
    default: 20,
    min: 1,
    description: '"sustained failures": this many consecutive failures spanning `CPS_WEBHOOK_PAUSE_MIN_STREAK_MINUTES` pause the endpoint',
  }),
  CPS_WEBHOOK_PAUSE_MIN_STREAK_MINUTES: integer({ default: 60, description: 'how long those failures must span to pause the endpoint' }),
  CPS_WEBHOOK_COOLDOWN_MINUTES: integer({ default: 60, description: 'how long a paused endpoint stays paused' }),
  CPS_WEBHOOK_POLL_INTERVAL_MS: integer({ default: 250, min: 10, description: 'how often the dispatcher looks for work' }),
  CPS_WEBHOOK_IDLE_POLL_MAX_MS: integer({
    default: 5000,
    min: 10,
    description:
      "while wake-ups are heard (PostgreSQL's LISTEN connection up; SQLite: the process's own writes), an idle dispatcher's polls back off from `CPS_WEBHOOK_POLL_INTERVAL_MS` up to this; work due by time (a retry, a lease that ran out) waits at most this long past its time",
  }),
  CPS_WEBHOOK_LEASE_MARGIN_MS: integer({
    default: 30_000,
    description: 'a delivery claimed by a process that died is re-sent this long after its time-out',
  }),
  // An old signing secret signs at most 30 days after a rotation.
  CPS_WEBHOOK_SECRET_GRACE_HOURS: integer({
    default: 24,
    max: 720,
    description:
      'after a secret rotation the old secret keeps signing this long, unless the merchant confirms the new one sooner (`0`: the new secret signs at once)',
  }),
  CPS_IMAGE_MIRRORING: flag({
    default: true,
    description: 'run the image mirroring worker inside `serve` (set `false` when a `worker` runs it)',
  }),
  CPS_MEDIA_DIR: text({
    default: null,
    shownDefault: '`media/` beside the database',
    accepts: 'a folder path',
    description: 'local folder of mirrored images',
  }),
  CPS_IMAGE_TIMEOUT_MS: integer({ default: 15_000, description: 'per-fetch time-out of an image' }),
  CPS_IMAGE_MAX_BYTES: integer({ default: 10 * MIB, bytes: true, description: 'size limit of an image' }),
  CPS_IMAGE_CONCURRENCY: integer({ default: 4, min: 1, description: 'image fetches at once (per mirroring process)' }),
  CPS_IMAGE_MERCHANT_CONCURRENCY: integer({
    default: 3,
    min: 1,
    description:
      "at most this many of those fetches for one merchant (at most `CPS_IMAGE_CONCURRENCY`): the others' images are not kept waiting",
  }),
  CPS_IMAGE_ORIGIN_CONCURRENCY: integer({
    default: 2,
    min: 1,
    description: 'at most this many fetches from one origin (scheme, host, port) of one merchant',
  }),
  CPS_IMAGE_COMMITS_AT_ONCE: integer({
    default: 4,
    min: 1,
    description:
      "on PostgreSQL, how many merchants' mirrored images one process commits at once, each merchant in a transaction of its own (a pooled connection each, at most `CPS_DB_POOL_SIZE`): one merchant's commit never holds another's products; on SQLite a batch is one transaction",
  }),
  CPS_IMAGE_ORIGIN_FAILURES: integer({
    default: 20,
    min: 1,
    description:
      'an origin of a merchant failing this many fetches in a row (DNS, refused or blocked address, connect error, time-out, 5xx) is down: its images wait, and one probe per interval tries it',
  }),
  CPS_IMAGE_ORIGIN_PROBE_MS: integer({ default: 30_000, min: 1, description: 'wait before the first probe of a down image origin' }),
  CPS_IMAGE_ORIGIN_PROBE_MAX_MS: integer({
    default: 15 * 60_000,
    min: 1,
    description: "each failed probe doubles a down origin's wait up to this; the first success reopens the origin",
  }),
  CPS_IMAGE_RETRY_SECONDS: list(wholeSeconds, {
    default: [60, 300, 1800, 7200, 21600, 43200],
    accepts: 'whole seconds',
    description: 'waits before each retry of a failing source (the last repeats)',
  }),
  CPS_IMAGE_DEAD_AFTER_HOURS: integer({
    default: 72,
    description: 'a source failing this long (other than 404/410, which are final at once) is dead',
  }),
  CPS_IMAGE_POLL_INTERVAL_MS: integer({ default: 1000, min: 10, description: 'how often the mirroring worker looks for work' }),
  CPS_IMAGE_IDLE_POLL_MAX_MS: integer({
    default: 5000,
    min: 10,
    description:
      "while wake-ups are heard, an idle mirror's polls back off from `CPS_IMAGE_POLL_INTERVAL_MS` up to this; work due by time (an image's next attempt, a down origin's probe) waits at most this long past its time",
  }),
  CPS_SMTP_URL: text({
    default: null,
    shownDefault: 'unset',
    accepts: 'an SMTP URL',
    description: "server to e-mail owners' notifications through (they are always in the notifications table)",
  }),
  CPS_SMTP_FROM: text({
    default: 'catalog-publishing@localhost',
    accepts: 'an e-mail address',
    description: 'the sender of those e-mails',
  }),
  // 600 at once covers a full sync of a 120k-product store at 200 per page; 50/s after that (docs/configuration.md#rate-limits).
  CPS_RATE_LIMIT_BURST: integer({ default: 600, min: 1, description: 'per-API-key token bucket on `/v1`: requests at once (see below)' }),
  CPS_RATE_LIMIT_PER_SECOND: integer({ default: 50, min: 1, description: "that bucket's refill rate, requests per second (see below)" }),
  // 1000 at once and 100/s: an import is one request, and a loop of single upserts at full speed keeps up.
  CPS_ADMIN_RATE_BURST: integer({
    default: 1000,
    min: 1,
    description: 'per-credential token bucket on `/admin/v1` (the admin token one, each merchant API key its own): requests at once',
  }),
  CPS_ADMIN_RATE_PER_SECOND: integer({ default: 100, min: 1, description: "that bucket's refill rate, requests per second" }),
  CPS_ADMIN_AUTH_MAX_FAILURES: integer({
    default: 20,
    min: 1,
    description:
      'wrong admin tokens or API keys one client address may send to `/admin/v1` at once; past them it may send one more every `CPS_ADMIN_AUTH_WINDOW_MINUTES` divided by this, and every other request from it answers `429` with `Retry-After` before its token is checked',
  }),
  CPS_ADMIN_AUTH_WINDOW_MINUTES: integer({
    default: 15,
    min: 1,
    description: 'the time in which an address gets those failures back (a token bucket refilling at that pace)',
  }),
  CPS_API_KEYS_PER_MERCHANT: integer({
    default: 100,
    min: 1,
    description:
      'active (unrevoked) API keys one merchant may have; creating one more answers `409 conflict` (admin API), an error in the panel and the CLI: revoke one first',
  }),
  CPS_API_KEY_CACHE_MS: integer({
    default: 1000,
    description:
      'a process accepts an active API key it looked up for this long without looking again (`0`: every request looks it up); a key revoked by another process stops working within this time, and its open change streams and long-polls there end within it too (their keys are re-checked this often, at least every 100 ms; see "Auth" below)',
  }),
  CPS_API_KEY_LAST_USED_SECONDS: integer({
    default: 60,
    min: 1,
    description:
      "a key's last use (`last_used_at` in the admin API's key list and the panel) is written at most this often per key: not on every request, in the background after the key check; the time shown lags the last request by at most about this much (twice this with several serving processes)",
  }),
  CPS_COMPRESSION_MIN_BYTES: integer({ default: 1024, bytes: true, description: 'JSON bodies smaller than this are never gzip/br-coded' }),
  // 64 MiB holds ~5000 coded pages of 200 products (~13 KB each): every page of 5 stores of 100k products in both codings.
  CPS_COMPRESSION_CACHE_BYTES: integer({
    default: 64 * MIB,
    bytes: true,
    description:
      'memory for the coded (gzip/br) bytes of JSON reads, kept by strong `ETag` and coding so a page is compressed once however many integrators read it (least recently used leave first; about 13 KB per coded page of 200 products, so 64 MiB holds every page of five 100k-product stores in both codings); `0` turns the cache off',
  }),
  CPS_READ_CACHE_BYTES: integer({
    default: 128 * MIB,
    bytes: true,
    description:
      "memory for the published bytes of pages and `?ids=` lists a process has read, answered again from memory while the merchant's catalog has not changed: every such read still asks the database for the merchant's published version (with the store, in one statement) and reads the rows again once any payload of the merchant changed, whichever process wrote (a page or list is kept from its second read, and when the cache is full only if it is read more often than what it would evict, so a sync reading each page once keeps nothing; least recently used leave first; each entry counts its bytes twice, as read and as answered: about 320 KB per page of 200 products, so 128 MiB holds some 400 pages); `0` turns the cache off",
  }),
  CPS_PANEL_INVITATION_HOURS: integer({ default: 72, min: 1, description: 'how long a panel invitation link works (once)' }),
  CPS_PANEL_SESSION_IDLE_MINUTES: integer({ default: 60, min: 1, description: 'a panel session ends after this long without a request' }),
  CPS_PANEL_SESSION_HOURS: integer({ default: 12, min: 1, description: 'a panel session ends this long after sign-in in any case' }),
  CPS_PANEL_SIGN_IN_MAX_FAILURES: integer({
    default: 5,
    min: 1,
    description:
      'failed panel sign-ins of one account from one address within `CPS_PANEL_SIGN_IN_WINDOW_MINUTES` after which each further attempt of that account from that address must wait (429 with `Retry-After`); failures from one address never hold back another',
  }),
  CPS_PANEL_SIGN_IN_WINDOW_MINUTES: integer({ default: 15, min: 1, description: 'the window those failed sign-ins are counted in' }),
  CPS_PANEL_SIGN_IN_DELAY_SECONDS: integer({
    default: 30,
    min: 1,
    description: 'the first such wait; it doubles with each further failure, up to the window',
  }),
  CPS_PANEL_SIGN_IN_ADDRESS_MAX_FAILURES: integer({
    default: 20,
    min: 1,
    description: 'failed sign-ins from one address, whatever the accounts, after which that address waits the same way',
  }),
  CPS_PANEL_PASSWORD_HASHES_AT_ONCE: integer({
    default: 1,
    min: 1,
    max: 64,
    description:
      "panel password hashes (scrypt: sign-in, password change, invitation and reset links; about 100 ms and 32 MiB each) a process runs at once, on Node's thread pool of 4 threads (`UV_THREADPOOL_SIZE`) that compression, file work and DNS share: keep it below the pool's size, so that a flood of sign-ins never holds them back",
  }),
  CPS_PANEL_PASSWORD_HASH_QUEUE: integer({
    default: 16,
    min: 0,
    max: 10_000,
    description:
      'panel password hashes that wait for a turn beyond those; any further sign-in, password change or link accepted is refused at once (503 with `Retry-After`, the attempt not counted as a failure)',
  }),
  CPS_TRUSTED_PROXIES: list(proxyAddress, {
    default: [],
    shownDefault: 'empty (trust none)',
    skipEmpty: true,
    accepts: 'IP addresses and CIDR ranges',
    description:
      "IP addresses and CIDR ranges (`10.0.0.0/8,2001:db8::/32`) of the proxies and load balancers in front of the service: from one of them, the client's address (what the panel's sign-in throttle counts by) is the rightmost `X-Forwarded-For` address that is not such a proxy; from any other peer, and when empty, the TCP peer is the client and `X-Forwarded-For` is ignored. Anything else refuses to start",
  }),
  CPS_PANEL_SHOWN_ONCE_MINUTES: integer({
    default: 10,
    min: 1,
    description:
      'a secret the panel shows once (new API key, signing secret, invitation or reset link) waits this long, server-side and sealed, for the page that shows it',
  }),
  CPS_LOG_LEVEL: oneOf(LOG_LEVELS, { default: 'info', description: 'least severe log level written' }),
  CPS_ACCESS_LOG: flag({ default: true, description: 'one log line per HTTP request' }),
  CPS_METRICS_TOKEN: text({
    default: null,
    shownDefault: 'unset (open)',
    accepts: 'any text',
    description: 'bearer token `/metrics` requires',
  }),
  CPS_METRICS_COUNT_MAX: integer({
    default: 10_000,
    min: 1,
    description:
      "`/metrics`' database gauges (the outbox's depth, waiting deliveries, failing and down image origins, images waiting on down origins) are each counted up to this many, read from an index: a scrape costs at most this many index entries per gauge, whatever a backlog's size (a gauge at the bound means at least that many)",
  }),
  CPS_SLOW_STATEMENT_MS: integer({
    default: 100,
    description:
      'a database statement that takes longer is logged at `warn` (`"msg":"slow statement"`, with its `statement` name, `engine` and `duration_ms`, never its parameters); `0`: never',
  }),
  CPS_OPS_PORT: integer<number | null>({
    default: null,
    max: 65535,
    shownDefault: 'unset',
    description: 'port `worker` answers `/healthz`, `/readyz` and `/metrics` on',
  }),
  CPS_MAX_CONNECTIONS: integer<number | null>({
    default: null,
    min: 1,
    shownDefault: 'the file descriptor limit minus `CPS_DESCRIPTOR_RESERVE`',
    description:
      "open HTTP connections (event streams, long-polls, exports, idle keep-alives included) the listener of `serve` (and of `worker`) holds at most: one more is answered `503 service_unavailable` with `Retry-After: 10` and closed (except `/healthz`, `/readyz` and `/metrics`, which are answered), not reset and never a 500. Unset, it is the process's soft file descriptor limit (`ulimit -n`, read from `/proc/self/limits` at start; 1024 assumed where that cannot be read) minus the reserve. `/readyz` and the `listening` log line show the limit, the reserve and the cap",
  }),
  CPS_DESCRIPTOR_RESERVE: integer({
    default: 128,
    min: 8,
    description:
      "file descriptors kept from connections for the rest of the process: some 80 for Node, its worker threads and the logs, the SQLite files (database, WAL, shared memory, per connection) or PostgreSQL's pooled connections (`CPS_DB_POOL_SIZE` per thread), and the export spool files; a quarter of it answers the connections past the cap (their 503, or the operations endpoints), and a connection beyond that is closed at once. Raise it with `CPS_DB_POOL_SIZE` or `CPS_EXPORT_CONCURRENCY`",
  }),
  CPS_SHUTDOWN_DELAY_MS: integer({ default: 0, description: 'on SIGTERM, `/readyz` answers 503 this long while the process still serves' }),
  CPS_SHUTDOWN_GRACE_MS: integer({ default: 10_000, description: 'then requests in flight get this long to finish' }),
});

/** A variable `SETTINGS` declares. */
export type SettingName = keyof typeof SETTINGS.shape;

/** The value of a setting left unset. */
export function settingDefault<N extends SettingName>(name: N): z.output<(typeof SETTINGS.shape)[N]> {
  return SETTINGS.shape[name].parse(undefined) as z.output<(typeof SETTINGS.shape)[N]>;
}

/** Bad values of the environment, one line each naming the variable, the value and the bounds. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
    this.name = 'ConfigError';
  }
}

/** What `schema` (SETTINGS, or a transform of it) makes of `env`, or a ConfigError listing every bad value. */
export function fromEnvironment<T>(schema: z.ZodType<T, Record<string, string | undefined>>, env: Record<string, string | undefined>): T {
  const parsed = schema.safeParse(env);
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((issue) => `${String(issue.path[0])} ${issue.message}`));
  return parsed.data;
}
