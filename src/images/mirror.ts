// The image mirroring worker (spec 2.1 image rules, 3 image state; docs/decisions.md#images):
// copies each not-yet-mirrored supplier image into the media store through the SSRF guard, with
// bounded concurrency shared fairly between merchants and origins, a time-out, a size limit and an image content-type check. A 404 or 410
// makes a source dead at once; other failures are retried with backoff until deadAfterHours have
// passed since the first one. Every transition re-resolves the products showing the image in
// every store, in one transaction with the state change, so it is recorded as a `content` change.
import { createHash } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { CatalogPublisher } from '../catalog/publish.js';
import type { Config } from '../config.js';
import { silentLogger, type Logger } from '../operations/log.js';
import { AddressGuard } from '../outbound/address-guard.js';
import { GuardedHttpClient, type OutboundClientOptions } from '../outbound/client.js';
import { scopeToMerchant } from '../storage/merchant-scope.js';
import type { CatalogStorage, ClaimedImageMirror } from '../storage/port.js';
import type { ImageMirrorWork } from '../catalog/model.js';
import { IMAGE_TYPES, LocalFolderMediaStore, type MediaStore } from './media-store.js';
import { sniffImageType } from './sniff.js';
import { type IdlePoll, startIdlePoll } from '../shared/idle-poll.js';

/** The formats the mirror keeps, as an error names them. */
const IMAGE_FORMATS = 'JPEG, PNG, GIF, WebP or AVIF';

export type ImageConfig = Config['images'];

/** What fetching a source gave: the copy, or why not (and whether that is final). */
export type FetchOutcome = { ok: true; bytes: Buffer; contentType: string } | { ok: false; error: string; permanent: boolean };

export interface ImageFetcher {
  fetch(url: string): Promise<FetchOutcome>;
  /** Ends the fetches in flight at once (a shutdown): they fail, and the mirror gives their images back. */
  abort?(): void;
  close(): Promise<void>;
}

/**
 * Stops reading a response body. undici reports the abort as an 'error' event on the body, which
 * would be an uncaught exception (and end the process) without a listener.
 */
function abandon(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => {});
  body.destroy();
}

export class HttpImageFetcher implements ImageFetcher {
  private readonly client: GuardedHttpClient;

  constructor(
    guard: AddressGuard,
    private readonly config: Pick<ImageConfig, 'timeoutMs' | 'maxBytes' | 'concurrency'>,
    /** The DNS resolver (default: the system's); tests answer names without a DNS query. */
    lookup?: OutboundClientOptions['lookup'],
  ) {
    this.client = new GuardedHttpClient(guard, { timeoutMs: config.timeoutMs, connections: config.concurrency, lookup });
  }

  async fetch(url: string): Promise<FetchOutcome> {
    const parsed = new URL(url);
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return { ok: false, error: 'unsupported_scheme', permanent: false };
    // Supplier images may be http:// (https-only is the webhooks' rule), but never an internal
    // address: the client checks IP literals before connecting, names at connection time after DNS.
    const accept = Object.keys(IMAGE_TYPES).join(', ');
    const exchange = await this.client.exchange(
      url,
      { method: 'GET', headers: { Accept: accept } },
      async (response): Promise<FetchOutcome> => {
        if (response.statusCode === 404 || response.statusCode === 410) {
          abandon(response.body);
          return { ok: false, error: `http_${response.statusCode}`, permanent: true };
        }
        if (response.statusCode < 200 || response.statusCode >= 300) {
          abandon(response.body);
          return { ok: false, error: `http_${response.statusCode}`, permanent: false };
        }
        const contentType = String(response.headers['content-type'] ?? '')
          .split(';')[0]!
          .trim()
          .toLowerCase();
        if (!IMAGE_TYPES[contentType]) {
          abandon(response.body);
          return { ok: false, error: `not_an_image (${contentType || 'no content type'})`, permanent: false };
        }
        const declared = Number(response.headers['content-length'] ?? 0);
        if (declared > this.config.maxBytes) {
          abandon(response.body);
          return { ok: false, error: 'too_large', permanent: false };
        }
        const chunks: Buffer[] = [];
        let size = 0;
        // undici's body yields Buffers (it types them any).
        for await (const chunk of response.body as AsyncIterable<Buffer>) {
          size += chunk.length;
          if (size > this.config.maxBytes) {
            abandon(response.body);
            return { ok: false, error: 'too_large', permanent: false };
          }
          chunks.push(Buffer.from(chunk));
        }
        // The bytes decide, not the label. Not an accepted image (HTML, SVG, a script in any
        // disguise): refused like a type that is not one. An accepted image under another image label
        // (a JPEG sent as image/png) is kept as what it is, and served with its real type.
        const bytes = Buffer.concat(chunks);
        const sniffed = sniffImageType(bytes);
        if (!sniffed)
          return { ok: false, error: `not_an_image (declared ${contentType}; the bytes are not ${IMAGE_FORMATS})`, permanent: false };
        return { ok: true, bytes, contentType: sniffed };
      },
    );
    return exchange.ok ? exchange.value : { ok: false, error: exchange.error, permanent: false };
  }

  abort(): void {
    this.client.abortInFlight();
  }

  close(): Promise<void> {
    return this.client.close();
  }
}

/** A failure of the origin rather than of the image: no answer (DNS, address, connection, time-out) or a 5xx. */
export function isOriginFailure(outcome: FetchOutcome): boolean {
  if (outcome.ok || outcome.permanent) return false;
  return /^(blocked_address|timeout|connection_refused|connection_error|http_5\d\d)$/.test(outcome.error);
}

/** The media key of a copy: the sha-256 of its bytes and the extension of its type. */
export function mediaKey(bytes: Uint8Array, contentType: string): string {
  return `${createHash('sha256').update(bytes).digest('hex')}.${IMAGE_TYPES[contentType]}`;
}

/** Origin and path only: a pre-signed URL's query (a signature, a token) is never logged. */
export function loggableUrl(url: string): string {
  try {
    const { origin, pathname } = new URL(url);
    return `${origin}${pathname}`;
  } catch {
    return '(unparsable URL)';
  }
}

/** Beyond a fetch's time-out, what mirroring a claimed image may take (storing the copy, re-publishing). */
const LEASE_MARGIN_MS = 60_000;

/**
 * Images claimed ahead per fetch slot: one claim (a write transaction) takes up to `concurrency *
 * CLAIM_AHEAD` images into a local queue, each merchant and origin up to CLAIM_AHEAD times its
 * share of the slots, and freed slots start them from there; the next claim comes when the queue is
 * down to half of what the last claim left in it (or at a poll or a wake-up). A queued image is
 * leased for its wait too: at most CLAIM_AHEAD fetches of its origin before it, each within the
 * time-out.
 */
export const CLAIM_AHEAD = 16;

/**
 * Transitions of images fetched meanwhile are committed together, at most this many per batch (one
 * transaction, or one per merchant where writers run at once: a merchant context each, each product
 * re-published once however many of its images changed), while the fetch slots they freed fetch the
 * next images.
 */
export const TRANSITIONS_PER_COMMIT = 64;

/**
 * How long a fetched image's transition waits for others before its commit starts (unless
 * TRANSITIONS_PER_COMMIT are waiting): a product's images, fetched one after the other, are
 * re-published once, and a commit serves several images.
 */
const COMMIT_GATHER_MS = 25;

/** Fetched images waiting for their transition's commit, at most: no more is started beyond it. */
const TRANSITIONS_WAITING_MAX = 4 * TRANSITIONS_PER_COMMIT;

/** A state change waiting to be committed, and who waits for it. */
interface WaitingTransition {
  image: ImageMirrorWork;
  patch: Partial<ImageMirrorWork>;
  committed: () => void;
  failed: (error: unknown) => void;
}

/** A claimed image not started yet, and until when its lease holds (ms). */
interface QueuedImage {
  image: ClaimedImageMirror;
  leasedUntil: number;
}

/**
 * A mirror keeps up to `concurrency` fetches running and refills a slot as soon as it
 * frees (no round waits for its slowest fetch), from the images it claimed ahead. Each claim asks
 * the storage for due work, merchants taking turns (the fewest fetches first) and, within a merchant,
 * its origins; a freed slot starts the queued image whose merchant, then origin, fetches fewest; a
 * merchant fetches at most `merchantConcurrency` at once, an origin of a merchant
 * `originConcurrency`. So one merchant's hanging sources hold a few slots until their time-outs,
 * never the others' turn.
 */
export class ImageMirror {
  /** The fallback poll's schedule, while started. */
  private schedule: IdlePoll | null = null;
  /** Started: a freed slot is refilled at once, and polls and wake-ups claim work. */
  private running = false;
  private stopping = false;
  /** The fetches (and their transitions) running, by the image they mirror. */
  private readonly fetches = new Set<Promise<void>>();
  /** Fetches running per merchant and origin: `${merchant_id} ${origin}`. */
  private readonly fetching = new Map<string, { merchant_id: number; origin: string; fetching: number }>();
  /** Fetches running per merchant. */
  private readonly merchantFetching = new Map<number, number>();
  /** Claimed images waiting for a slot, in the claims' turn order. */
  private queued: QueuedImage[] = [];
  /** The queue's length after the last claim: the next claim comes at half of it. */
  private queuedAfterClaim = 0;
  /** The last claim took every image due that it could see: the next waits for a poll or a wake-up. */
  private claimedAllDue = false;
  /** Claims run one at a time, so that two never hand out the same free slot. */
  private claiming: Promise<unknown> = Promise.resolve();
  /** A claim started by a poll, a wake-up or a freed slot (started mirror); another is asked for meanwhile. */
  private pumping: Promise<void> | null = null;
  private pumpAgain = false;
  private pumpForced = false;
  /** Images whose mirroring failed in the storage or media store (given back), so far. */
  private failures = 0;
  /** Transitions fetched and waiting for a commit, and the commit running (one at a time). */
  private readonly waitingTransitions: WaitingTransition[] = [];
  private committing: Promise<void> | null = null;
  private gathering: NodeJS.Timeout | null = null;
  /** Each fetched image's transition, from its fetch to its commit (or failure). */
  private readonly transitions = new Set<Promise<void>>();
  private readonly log: Logger;

  constructor(
    private readonly storage: CatalogStorage,
    private readonly media: MediaStore,
    private readonly fetcher: ImageFetcher,
    private readonly config: ImageConfig,
    /** Where mirrored copies are served: `${publicBaseUrl}/media/{key}`. */
    private readonly publicBaseUrl: string,
    private readonly now: () => Date,
    /** Re-publishes the products that list an image when its state changes. */
    private readonly publisher: CatalogPublisher,
    logger: Logger = silentLogger,
  ) {
    this.log = logger.child({ component: 'image-mirror' });
  }

  private get perMerchant(): number {
    return Math.min(this.config.merchantConcurrency, this.config.concurrency);
  }

  private get perOrigin(): number {
    return Math.min(this.config.originConcurrency, this.perMerchant);
  }

  /**
   * Mirrors due images, at most concurrency * 8 of them, refilling each freed slot at once;
   * resolves when no more due work fits and every fetch it started is done; returns how many it tried.
   */
  async tick(): Promise<number> {
    const bound = this.config.concurrency * 8;
    const failuresBefore = this.failures;
    let tried = 0;
    let force = true;
    for (;;) {
      // After a storage or media failure, no more claims: the image given back would be claimed again at once.
      if (tried < bound && this.failures === failuresBefore)
        tried += await this.claimAndStart(bound - tried, force, () => this.failures === failuresBefore);
      force = false;
      if (this.fetches.size === 0 && this.transitions.size === 0) {
        // What a round claimed and did not start (a failure ended it) is given back.
        if (!this.running && this.queued.length > 0) await this.giveBack(this.queued.splice(0).map((q) => q.image));
        return tried;
      }
      await Promise.race([...this.fetches, ...this.transitions]);
    }
  }

  /**
   * Starts queued images in the free slots and, when the queue runs low (or `force`: a poll, a
   * wake-up), claims more due work into it (at most `max` started and queued in all); returns how
   * many it started. `still`: checked when the claim's turn comes (a transition that failed meanwhile
   * gave its image back, due at once: a round must not take it again).
   */
  private claimAndStart(max: number, force: boolean, still: () => boolean = () => true): Promise<number> {
    const claim = this.claiming.then(async () => {
      if (this.stopping) return 0;
      let started = this.startQueued(max);
      const room = Math.min(
        this.config.concurrency * CLAIM_AHEAD - this.fetches.size - this.queued.length,
        max - started - this.queued.length,
      );
      // After a claim that came back short of its room with no merchant nor origin at its cap, every
      // image due then was claimed (here or by another process): a freed slot does not claim again
      // until a poll or a wake-up says more may be due.
      const low = !this.claimedAllDue && (this.queued.length === 0 || this.queued.length <= this.queuedAfterClaim / 2);
      // Fetched images waiting for their commit hold the claims back: the commits keep up.
      if (room <= 0 || !(force || low) || this.waitingTransitions.length >= TRANSITIONS_WAITING_MAX || !still()) return started;
      const now = this.now();
      // Leased for the wait in the queue (at most CLAIM_AHEAD fetches of its origin before it), its fetch and what follows it.
      const leasedUntil = now.getTime() + this.config.timeoutMs * (CLAIM_AHEAD + 1) + LEASE_MARGIN_MS;
      // Queued images count as busy: each merchant and origin queues at most CLAIM_AHEAD times its share.
      const busy = new Map<string, { merchant_id: number; origin: string; fetching: number }>();
      for (const [key, b] of this.fetching) busy.set(key, { ...b });
      for (const { image } of this.queued) {
        const key = `${image.merchant_id} ${image.origin}`;
        const b = busy.get(key) ?? { merchant_id: image.merchant_id, origin: image.origin, fetching: 0 };
        b.fetching++;
        busy.set(key, b);
      }
      const due = await this.storage.claimDueImageMirrors(now.toISOString(), room, new Date(leasedUntil).toISOString(), {
        perMerchant: this.perMerchant * CLAIM_AHEAD,
        perOrigin: this.perOrigin * CLAIM_AHEAD,
        busy: [...busy.values()],
        deadAfterMs: this.config.deadAfterHours * 3600_000,
      });
      for (const image of due) this.queued.push({ image, leasedUntil });
      this.queuedAfterClaim = this.queued.length;
      this.claimedAllDue = due.length < room && !atCap(busy.values(), due, this.perMerchant * CLAIM_AHEAD, this.perOrigin * CLAIM_AHEAD);
      started += this.startQueued(max - started);
      return started;
    });
    this.claiming = claim.catch(() => undefined);
    return claim;
  }

  /**
   * Starts queued images while slots are free (at most `max`): each time the one whose merchant,
   * then origin, fetches fewest now (the claims' order among equals), within the merchant's and the
   * origin's caps. An image whose lease would end before its fetch could is given back instead.
   */
  private startQueued(max: number): number {
    let started = 0;
    const stale: ClaimedImageMirror[] = [];
    const now = this.now().getTime();
    while (
      started < max &&
      this.queued.length > 0 &&
      this.fetches.size < this.config.concurrency &&
      this.waitingTransitions.length < TRANSITIONS_WAITING_MAX &&
      !this.stopping
    ) {
      let best = -1;
      let bestMerchant = Infinity;
      let bestOrigin = Infinity;
      for (let i = 0; i < this.queued.length; i++) {
        const { image } = this.queued[i]!;
        const merchant = this.merchantFetching.get(image.merchant_id) ?? 0;
        if (merchant >= this.perMerchant || merchant > bestMerchant) continue;
        const origin = this.fetching.get(`${image.merchant_id} ${image.origin}`)?.fetching ?? 0;
        if (origin >= this.perOrigin) continue;
        if (merchant < bestMerchant || origin < bestOrigin) {
          best = i;
          bestMerchant = merchant;
          bestOrigin = origin;
          if (merchant === 0 && origin === 0) break;
        }
      }
      if (best < 0) break;
      const [{ image, leasedUntil }] = this.queued.splice(best, 1) as [QueuedImage];
      if (leasedUntil < now + this.config.timeoutMs + LEASE_MARGIN_MS / 2) {
        stale.push(image);
        continue;
      }
      this.launch(image);
      started++;
    }
    if (stale.length > 0) void this.giveBack(stale);
    return started;
  }

  private launch(image: ClaimedImageMirror): void {
    const key = `${image.merchant_id} ${image.origin}`;
    const busy = this.fetching.get(key) ?? { merchant_id: image.merchant_id, origin: image.origin, fetching: 0 };
    busy.fetching++;
    this.fetching.set(key, busy);
    this.merchantFetching.set(image.merchant_id, (this.merchantFetching.get(image.merchant_id) ?? 0) + 1);
    let failed = false;
    const fetch: Promise<void> = this.mirror(image)
      // One image's storage or media failure must not end the others' work; the image is due again
      // at once, as it was before the claim (tried again at the next poll, not in a tight loop).
      .catch(async (error: unknown) => {
        failed = true;
        this.failures++;
        this.log.error({ err: error, merchant_id: image.merchant_id, url: loggableUrl(image.url) }, 'mirroring an image failed');
        await this.release(image);
      })
      .finally(() => {
        this.fetches.delete(fetch);
        if (--busy.fetching === 0) this.fetching.delete(key);
        const merchant = this.merchantFetching.get(image.merchant_id)! - 1;
        if (merchant === 0) this.merchantFetching.delete(image.merchant_id);
        else this.merchantFetching.set(image.merchant_id, merchant);
        if (this.running && !failed) this.pump();
      });
    this.fetches.add(fetch);
  }

  /** Ends the claim on an image not mirrored: due again when it was before the claim. */
  private async release(image: ImageMirrorWork): Promise<void> {
    await scopeToMerchant(this.storage, image.merchant_id)
      .updateImageMirror(image.url, { next_attempt_at: image.next_attempt_at })
      .catch((error: unknown) =>
        this.log.error(
          { err: error, merchant_id: image.merchant_id, url: loggableUrl(image.url) },
          'giving back an image claim failed (it is due again when the lease ends)',
        ),
      );
  }

  /**
   * Ends the claims on queued images never started, in one transaction and in the claims' turn (a
   * claim running now still sees them leased): due again when they were before the claim.
   */
  private giveBack(images: ClaimedImageMirror[]): Promise<void> {
    if (images.length === 0) return Promise.resolve();
    const given = this.claiming.then(() =>
      this.storage
        .transaction(async (tx) => {
          for (const image of images)
            await scopeToMerchant(tx, image.merchant_id).updateImageMirror(image.url, { next_attempt_at: image.next_attempt_at });
        })
        .catch((error: unknown) =>
          this.log.error(
            { err: error, images: images.length },
            'giving back claimed images failed (they are due again when their lease ends)',
          ),
        ),
    );
    this.claiming = given;
    return given;
  }

  /** Queued images of a merchant's origin, taken out of the queue (it is down: they wait for its probe). */
  private unqueueOrigin(merchantId: number, origin: string): ClaimedImageMirror[] {
    const taken: ClaimedImageMirror[] = [];
    this.queued = this.queued.filter((q) => {
      if (q.image.merchant_id !== merchantId || q.image.origin !== origin || q.image.expired) return true;
      taken.push(q.image);
      return false;
    });
    return taken;
  }

  /** Starts queued work and claims more when the queue runs low (`force`: whenever it has room), now or once more after the claim running. */
  private pump(force = false): void {
    if (this.stopping) return;
    if (this.pumping) {
      this.pumpAgain = true;
      this.pumpForced ||= force;
      return;
    }
    this.pumping = this.claimAndStart(Infinity, force)
      .then(
        (started) => {
          if (started > 0) this.schedule?.work();
        },
        (error: unknown) => this.log.error({ err: error }, 'claiming images to mirror failed'),
      )
      .finally(() => {
        this.pumping = null;
        if (this.pumpAgain) {
          const forced = this.pumpForced;
          this.pumpAgain = false;
          this.pumpForced = false;
          this.pump(forced);
        }
      });
  }

  /**
   * Mirrors continuously: every pollIntervalMs (backing off while idle: shared/idle-poll.ts), at
   * once when the storage tells of new images (polling stays the fallback), and whenever a fetch
   * ends and frees a slot.
   */
  start(): void {
    if (this.schedule) return;
    this.running = true;
    const poll = () => this.pump(true);
    // The fallback poll backs off while it finds nothing and wake-ups are heard (shared/idle-poll.ts):
    // work is a claim that started fetches, or fetches, commits or claimed images under way here
    // while the last claim left due images unclaimed. Once it took every image due, a poll can only
    // find what became due by time since (a retry, a probe: at most CPS_IMAGE_IDLE_POLL_MAX_MS late,
    // as when idle): a fetch hanging until its time-out polled every second for nothing.
    this.schedule = startIdlePoll(this.storage, 'images', this.config, {
      busy: () => !this.claimedAllDue && (this.fetches.size > 0 || this.transitions.size > 0 || this.queued.length > 0),
      poll,
    });
    poll();
  }

  /**
   * Takes no new work, ends the fetches running (a shutdown within CPS_SHUTDOWN_GRACE_MS
   * never waits for a supplier's time-out; their images are given back, due as before, with no
   * attempt counted), waits for them, then closes the fetcher.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.running = false;
    this.schedule?.stop();
    this.schedule = null;
    await this.pumping;
    await this.claiming;
    // Claimed and not started: given back, due as before.
    await this.giveBack(this.queued.splice(0).map((q) => q.image));
    this.fetcher.abort?.();
    await Promise.all(this.fetches);
    // What was fetched is committed (or given back) before the mirror ends.
    this.commitWaiting();
    await Promise.all(this.transitions);
    await this.claiming;
    await this.fetcher.close();
  }

  private async mirror(image: ClaimedImageMirror): Promise<void> {
    if (image.expired) return this.expire(image, image.expired);
    const outcome = await this.fetcher.fetch(image.url);
    // Ended by stop(): not the source's failure. Due again as it was before the claim.
    if (!outcome.ok && this.stopping) {
      await this.release(image);
      return;
    }
    const now = this.now();
    await this.recordOrigin(image, outcome, now);
    const at = now.toISOString();
    if (outcome.ok) {
      const key = mediaKey(outcome.bytes, outcome.contentType);
      await this.media.put(key, outcome.bytes);
      this.transition(image, {
        state: 'mirrored',
        mirrored_url: `${this.publicBaseUrl}/media/${key}`,
        attempts: image.attempts + 1,
        first_failure_at: null,
        next_attempt_at: null,
        last_error: null,
        updated_at: at,
      });
      return;
    }
    // A probe of a down origin never fetched before failed since it waited on the origin (as its siblings that wait).
    const firstFailure =
      image.first_failure_at ?? (image.waiting_since !== undefined && image.waiting_since < at ? image.waiting_since : at);
    const failingFor = now.getTime() - Date.parse(firstFailure);
    if (outcome.permanent || failingFor >= this.config.deadAfterHours * 3600_000) {
      this.log.warn(
        { merchant_id: image.merchant_id, url: loggableUrl(image.url), error: outcome.error, attempts: image.attempts + 1 },
        'image source is dead',
      );
      this.transition(image, {
        state: 'dead',
        attempts: image.attempts + 1,
        first_failure_at: firstFailure,
        next_attempt_at: null,
        last_error: outcome.error,
        updated_at: at,
      });
      return;
    }
    const waits = this.config.retrySeconds;
    const wait = waits[Math.min(image.attempts, waits.length - 1)] ?? 3600;
    // Still not mirrored: the supplier URL stays in the payloads, nothing to re-publish.
    await scopeToMerchant(this.storage, image.merchant_id).updateImageMirror(image.url, {
      attempts: image.attempts + 1,
      first_failure_at: firstFailure,
      last_error: outcome.error,
      next_attempt_at: new Date(now.getTime() + wait * 1000).toISOString(),
      updated_at: at,
    });
  }

  /**
   * An image of a down origin whose own time is up (claimed `expired`): dead as its fetch would have
   * made it, without the fetch (its origin is down), with the origin's error; `attempts` counts fetches only.
   */
  private expire(image: ClaimedImageMirror, expired: NonNullable<ClaimedImageMirror['expired']>): void {
    this.log.warn(
      { merchant_id: image.merchant_id, url: loggableUrl(image.url), error: expired.last_error, origin: image.origin },
      'image source is dead (its origin is down)',
    );
    this.transition(image, {
      state: 'dead',
      first_failure_at: expired.first_failure_at,
      next_attempt_at: null,
      last_error: expired.last_error,
      updated_at: this.now().toISOString(),
    });
  }

  /**
   * Counts an origin's failures in a row (the host did not answer, or answered 5xx); at
   * originFailures it is down until its next probe, each failed probe doubling the wait up to
   * originProbeMaxMs. Any other answer (an image, a 404, not an image) means the origin is up.
   */
  private async recordOrigin(image: ClaimedImageMirror, outcome: FetchOutcome, now: Date): Promise<void> {
    const merchant = scopeToMerchant(this.storage, image.merchant_id);
    if (!isOriginFailure(outcome)) {
      if (image.origin_failing) {
        await merchant.clearImageOrigin(image.origin, now.toISOString());
        // Up again: its waiting images are due, the next freed slot claims them.
        this.claimedAllDue = false;
      }
      return;
    }
    // Counted in one step (several fetches of the origin fail at once); down once, by the count that reaches the limit.
    const state = await merchant.countImageOriginFailure(image.origin, outcome.ok ? '' : outcome.error);
    const at = now.getTime();
    // Down (now, or already by another fetch or process): its queued images are not attempted, they wait for its probe.
    if (state.down_since !== null || state.failures >= this.config.originFailures)
      void this.giveBack(this.unqueueOrigin(image.merchant_id, image.origin));
    if (state.down_since === null && state.failures >= this.config.originFailures) {
      state.down_since = now.toISOString();
      state.probe_ms = this.config.originProbeMs;
      state.next_probe_at = new Date(at + state.probe_ms).toISOString();
      this.log.warn(
        { merchant_id: image.merchant_id, origin: image.origin, failures: state.failures, next_probe_at: state.next_probe_at },
        'image origin is down',
      );
    } else if (state.down_since !== null && image.probe) {
      state.probe_ms = Math.min((state.probe_ms ?? this.config.originProbeMs) * 2, this.config.originProbeMaxMs);
      state.next_probe_at = new Date(at + state.probe_ms).toISOString();
    } else return;
    await merchant.putImageOrigin(state);
  }

  /**
   * A state change and the re-publishing it causes, in one transaction (a `content` change), with
   * the other transitions fetched meanwhile. The fetch's slot is free at once; the image stays leased
   * until the commit, and is given back if the commit fails.
   */
  private transition(image: ImageMirrorWork, patch: Partial<ImageMirrorWork>): void {
    const transition: Promise<void> = new Promise<void>((committed, failed) => {
      this.waitingTransitions.push({ image, patch, committed, failed });
      this.commitWaiting();
    })
      .catch(async (error: unknown) => {
        this.failures++;
        this.log.error({ err: error, merchant_id: image.merchant_id, url: loggableUrl(image.url) }, 'mirroring an image failed');
        // Given back in the claims' turn: a claim running now still sees it leased, and the next one
        // sees the failure first (no claim takes it again in this round, nor in a tight loop).
        const released = this.claiming.then(() => this.release(image));
        this.claiming = released.catch(() => undefined);
        await released;
      })
      .finally(() => this.transitions.delete(transition));
    this.transitions.add(transition);
  }

  /**
   * Commits the waiting transitions, TRANSITIONS_PER_COMMIT at a time, one commit after the other;
   * a commit starts COMMIT_GATHER_MS after the first of them waits (at once when a whole batch waits
   * or the mirror stops), so that transitions fetched meanwhile share it.
   */
  private commitWaiting(): void {
    if (this.committing || this.waitingTransitions.length === 0) return;
    if (this.waitingTransitions.length < TRANSITIONS_PER_COMMIT && !this.stopping) {
      this.gathering ??= setTimeout(() => {
        this.gathering = null;
        this.commitBatch();
      }, COMMIT_GATHER_MS);
      return;
    }
    this.commitBatch();
  }

  private commitBatch(): void {
    if (this.gathering) clearTimeout(this.gathering);
    this.gathering = null;
    if (this.committing || this.waitingTransitions.length === 0) return;
    const batch = this.waitingTransitions.splice(0, TRANSITIONS_PER_COMMIT);
    // Where writers run at once and lock what they write (PostgreSQL), each merchant's transitions
    // are a transaction of their own, up to `commitsAtOnce` (CPS_IMAGE_COMMITS_AT_ONCE) at once: it holds its
    // merchant's products and change sequencer until it commits, and no other merchant's. (One
    // transaction for the batch held each merchant until the last one was written: with mirrors in
    // three processes and 316 merchants, every commit waited for the others', and one in a shutdown
    // took 6 s.) With one writer at a time (SQLite) the batch is one transaction: a transaction per
    // merchant cost 5 times as much there.
    const merchants = transitionsByMerchant(batch);
    const commits = this.storage.concurrentWrites ? merchants.map((merchant) => [merchant]) : [merchants];
    let next = 0;
    let failures = 0;
    const commitNext = async (): Promise<void> => {
      for (let commit = commits[next++]; commit !== undefined; commit = commits[next++]) {
        try {
          await this.storage.transaction(async (tx) => {
            // A claim is cross-tenant; each merchant's images, once claimed, are written through its
            // scope, all in a few statements, and their products re-published once.
            for (const [merchantId, transitions] of commit) {
              const merchant = scopeToMerchant(tx, merchantId);
              const changes = transitions.map(({ image, patch }) => ({ url: image.url, patch }));
              await this.publisher.publishProducts(tx, merchant, await merchant.updateImageMirrors(changes));
            }
          });
          for (const [, transitions] of commit) for (const waiting of transitions) waiting.committed();
        } catch (error) {
          failures++;
          for (const [, transitions] of commit) for (const waiting of transitions) waiting.failed(error);
        }
      }
    };
    this.committing = Promise.all(Array.from({ length: Math.min(this.config.commitsAtOnce, commits.length) }, commitNext))
      .then(() => {
        // No more claims after a failed commit: the next poll tries again.
        if (this.running && failures === 0) this.pump();
      })
      .finally(() => {
        this.committing = null;
        this.commitWaiting();
      });
  }
}

/**
 * A commit's transitions by merchant, merchants in ascending id order, each merchant's in the
 * order they were fetched (its last change of an image wins). In one transaction for the batch
 * each merchant's part locks its products and change sequencer until COMMIT: two transactions of
 * the same merchants take them in one order (in the order of the fetches, two `serve`s and a
 * `worker` on PostgreSQL deadlocked 160 times in a minute of bench:scale's many-tenants phase).
 */
export function transitionsByMerchant<T extends { image: ImageMirrorWork }>(batch: readonly T[]): [merchantId: number, transitions: T[]][] {
  const byMerchant = new Map<number, T[]>();
  for (const transition of batch) {
    const transitions = byMerchant.get(transition.image.merchant_id) ?? [];
    byMerchant.set(transition.image.merchant_id, transitions);
    transitions.push(transition);
  }
  return [...byMerchant].sort(([a], [b]) => a - b);
}

/**
 * Whether a merchant or an origin of a merchant is at its cap of fetches (running and queued) once
 * the claimed images are counted: a claim that came back short may have left it due work.
 */
export function atCap(
  busy: Iterable<{ merchant_id: number; origin: string; fetching: number }>,
  claimed: readonly ClaimedImageMirror[],
  perMerchant: number,
  perOrigin: number,
): boolean {
  const merchants = new Map<number, number>();
  const origins = new Map<string, number>();
  const count = (merchantId: number, origin: string, n: number) => {
    merchants.set(merchantId, (merchants.get(merchantId) ?? 0) + n);
    origins.set(`${merchantId} ${origin}`, (origins.get(`${merchantId} ${origin}`) ?? 0) + n);
  };
  for (const b of busy) count(b.merchant_id, b.origin, b.fetching);
  for (const image of claimed) count(image.merchant_id, image.origin, 1);
  return [...merchants.values()].some((n) => n >= perMerchant) || [...origins.values()].some((n) => n >= perOrigin);
}

/** The worker as `serve` and `worker` run it: local media folder, HTTP fetcher through the SSRF guard. */
export function createImageMirror(
  storage: CatalogStorage,
  config: Config,
  options: { now?: () => Date; logger?: Logger; guard?: AddressGuard; publisher?: CatalogPublisher } = {},
): ImageMirror {
  const now = options.now ?? (() => new Date());
  const fetcher = new HttpImageFetcher(options.guard ?? new AddressGuard(config.webhooks.allowHosts), config.images);
  return new ImageMirror(
    storage,
    new LocalFolderMediaStore(config.images.mediaDir),
    fetcher,
    config.images,
    config.publicBaseUrl,
    now,
    options.publisher ?? new CatalogPublisher(now, config.limits.publishChunk),
    options.logger,
  );
}
