// Failing sources (spec 2.1 image rule 3, 3 image state; docs/decisions.md#images): a 404 or 410
// makes a source dead at once, and a dead image is omitted from `images` in every store. Any other
// failure (5xx, a time-out, an oversized body, a type that is not an accepted image, SVG, a
// redirect) keeps the image not mirrored, served by its supplier URL, retried after the waits of
// config.images.retrySeconds, until a fetch fails deadAfterHours (72 h) or more after the first
// failure: then it is dead. A failure that changes no state records nothing; one successful fetch
// mirrors the image. Driven by a fake clock; only the time-out takes real time (300 ms, on a mirror
// of its own: the world's 2 s is for sources that answer, lest a slow answer be taken for a time-out).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ImageBehaviour } from '../support/image-server.js';
import { HOUR, IMAGE_DEFAULTS, MINUTE, NOTHING, SECOND, contentOf, everyStore, startImageWorld, type ImageWorld } from './world.js';

let world: ImageWorld;

beforeEach(async () => {
  world = await startImageWorld();
});
afterEach(async () => {
  await world.close();
});

const DEAD_AFTER = IMAGE_DEFAULTS.deadAfterHours * HOUR;
/** The fetch time-out where the source never answers. */
const HANGING_TIMEOUT_MS = 300;

describe('404 and 410: dead at once', () => {
  it.each([404, 410])(
    'omits an image whose source answers %i from images in every store, with one content change per store',
    async (status) => {
      const { images } = world;
      const dead = images.url(`/status/${status}/gone.png`);
      const id = await world.putProduct('BP-40', [dead]);
      expect(await world.imagesInEveryStore(id)).toEqual(everyStore([dead]));
      const at = world.clock.iso;
      expect(await world.recorded(() => world.mirror.tick())).toEqual(contentOf(id));
      expect(await world.imagesInEveryStore(id)).toEqual(everyStore([]));
      expect(await world.sourceImages('BP-40')).toEqual([{ url: dead, state: 'dead', mirrored_url: null }]);
      expect(await world.status()).toEqual({
        pending: 0,
        mirrored: 0,
        dead: 1,
        dead_images: [{ url: dead, last_error: `http_${status}`, first_failure_at: at, updated_at: at }],
      });
      // Dead is final: never fetched again, nothing more recorded.
      world.clock.advance(100 * HOUR);
      expect(await world.recorded(async () => expect(await world.mirror.tick()).toBe(0))).toEqual(NOTHING);
      expect(images.hits(`/status/${status}/gone.png`)).toBe(1);
    },
  );

  it('keeps the other images of the product, in order, and changes every product listing the dead image', async () => {
    const { images } = world;
    const dead = images.url('/status/404/shared.png');
    const first = await world.putProduct('BP-40', [images.url('/png/a.png'), dead, images.url('/png/b.png')]);
    const second = await world.putProduct('BP-55', [dead]);
    await world.mirror.tick();
    const mirrored = (name: string) => world.mediaUrl(images.bytes(`/png/${name}.png`), 'png');
    expect(await world.imagesInEveryStore(first)).toEqual(everyStore([mirrored('a'), mirrored('b')]));
    expect(await world.imagesInEveryStore(second)).toEqual(everyStore([]));
    expect(images.hits('/status/404/shared.png')).toBe(1);
    expect(await world.status()).toMatchObject({ pending: 0, mirrored: 2, dead: 1 });
  });
});

describe('other failures: retried with backoff, the supplier URL served meanwhile', () => {
  const failures: [string, string, ImageBehaviour | null, string][] = [
    ['a 500', '/status/500/img.png', null, 'http_500'],
    ['a 503', '/png/unavailable.png', { status: 503 }, 'http_503'],
    ['a response without headers past the time-out', '/slow/img.png', null, 'timeout'],
    ['a body that stalls past the time-out', '/stall/img.png', null, 'timeout'],
    ['a body larger than maxBytes, announced in Content-Length', '/huge/img.png', null, 'too_large'],
    ['a body larger than maxBytes, streamed without Content-Length', '/huge-chunked/img.png', null, 'too_large'],
    ['text/html', '/html/img.png', null, 'not_an_image (text/html)'],
    ['SVG (image/svg+xml)', '/svg/logo.svg', null, 'not_an_image (image/svg+xml)'],
    // The bytes decide, not the label.
    [
      'HTML labelled image/png',
      '/disguised-html/img.png',
      null,
      'not_an_image (declared image/png; the bytes are not JPEG, PNG, GIF, WebP or AVIF)',
    ],
    [
      'SVG labelled image/png',
      '/disguised-svg/img.png',
      null,
      'not_an_image (declared image/png; the bytes are not JPEG, PNG, GIF, WebP or AVIF)',
    ],
    ['a redirect (not followed)', '/moved/img.png', null, 'http_301'],
  ];

  it.each(failures)(
    'keeps the supplier URL after %s, records nothing, and makes the source dead on the first failure 72 h after the first',
    async (_, path, behaviour, error) => {
      const { images } = world;
      if (behaviour) images.set(path, behaviour);
      const source = images.url(path);
      const id = await world.putProduct('BP-40', [source]);
      const mirror = error === 'timeout' ? world.otherMirror({ timeoutMs: HANGING_TIMEOUT_MS }) : world.mirror;
      const firstFailure = world.clock.iso;
      expect(await world.recorded(() => mirror.tick())).toEqual(NOTHING);
      expect(await world.imagesInEveryStore(id)).toEqual(everyStore([source]));
      expect(await world.sourceImages('BP-40')).toEqual([{ url: source, state: 'pending', mirrored_url: null }]);
      expect(await world.status()).toEqual({ pending: 1, mirrored: 0, dead: 0, dead_images: [] });

      // The next fetch made 72 h after the first failure fails too: dead, omitted, one change per store.
      world.clock.advance(DEAD_AFTER);
      const deadAt = world.clock.iso;
      expect(await world.recorded(() => mirror.tick())).toEqual(contentOf(id));
      expect(await world.imagesInEveryStore(id)).toEqual(everyStore([]));
      expect(await world.status()).toEqual({
        pending: 0,
        mirrored: 0,
        dead: 1,
        dead_images: [{ url: source, last_error: error, first_failure_at: firstFailure, updated_at: deadAt }],
      });
      expect(images.hits(path)).toBe(2);
      if (path === '/moved/img.png') expect(images.hits('/png/moved.png')).toBe(0);
    },
  );

  it('retries after each wait of retrySeconds (the last one repeating) and is dead at the first failed fetch 72 h or more after the first', async () => {
    const { images } = world;
    const path = '/status/500/backoff.png';
    const source = images.url(path);
    const id = await world.putProduct('BP-40', [source]);
    const firstFailure = world.clock.iso;
    expect(await world.recorded(() => world.mirror.tick())).toEqual(NOTHING);
    let elapsed = 0;
    let fetches = 1;
    const waits = IMAGE_DEFAULTS.retrySeconds;
    expect(waits).toEqual([60, 300, 1800, 7200, 21600, 43200]);
    for (let retry = 0; ; retry++) {
      const wait = waits[Math.min(retry, waits.length - 1)]! * SECOND;
      // Not due a millisecond before its wait has passed ...
      world.clock.advance(wait - 1);
      expect(await world.mirror.tick()).toBe(0);
      expect(images.hits(path)).toBe(fetches);
      // ... due when it has.
      world.clock.advance(1);
      elapsed += wait;
      const changes = await world.recorded(() => world.mirror.tick());
      fetches++;
      expect(images.hits(path)).toBe(fetches);
      if (elapsed < DEAD_AFTER) {
        expect(changes, `retry ${retry + 1} after ${elapsed / HOUR} h`).toEqual(NOTHING);
        expect(await world.imagesInEveryStore(id)).toEqual(everyStore([source]));
        continue;
      }
      expect(changes).toEqual(contentOf(id));
      break;
    }
    // 60 s + 5 min + 30 min + 2 h + 6 h + 12 h * 5 = 68.6 h: still pending; the next, at 80.6 h, is dead.
    expect(fetches).toBe(12);
    expect(elapsed).toBe(290_160 * SECOND);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([]));
    expect((await world.status()).dead_images).toEqual([
      { url: source, last_error: 'http_500', first_failure_at: firstFailure, updated_at: world.clock.iso },
    ]);
  });

  it('is not dead at a failed fetch a millisecond before 72 h, and dead at the next', async () => {
    const { images } = world;
    const source = images.url('/status/500/edge.png');
    const id = await world.putProduct('BP-40', [source]);
    await world.mirror.tick();
    world.clock.advance(DEAD_AFTER - 1);
    expect(await world.recorded(() => world.mirror.tick())).toEqual(NOTHING);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([source]));
    // That failure was retry 1: the next one waits retrySeconds[1].
    world.clock.advance(IMAGE_DEFAULTS.retrySeconds[1]! * SECOND);
    expect(await world.recorded(() => world.mirror.tick())).toEqual(contentOf(id));
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([]));
  });

  it('mirrors a source that fails, then serves: the streak ends and the service URL is served', async () => {
    const { images } = world;
    const path = '/png/flaky.png';
    images.set(path, { status: 500 });
    const source = images.url(path);
    const id = await world.putProduct('BP-40', [source]);
    expect(await world.recorded(() => world.mirror.tick())).toEqual(NOTHING);
    world.clock.advance(MINUTE);
    images.set(path, { status: 502 });
    expect(await world.recorded(() => world.mirror.tick())).toEqual(NOTHING);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([source]));

    images.set(path, { png: 'flaky' });
    world.clock.advance(5 * MINUTE);
    expect(await world.recorded(() => world.mirror.tick())).toEqual(contentOf(id));
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([world.mediaUrl(images.bytes(path), 'png')]));
    expect(await world.status()).toEqual({ pending: 0, mirrored: 1, dead: 0, dead_images: [] });
    // Mirrored is final: a source that fails afterwards changes nothing.
    images.set(path, { status: 404 });
    world.clock.advance(DEAD_AFTER);
    expect(await world.recorded(async () => expect(await world.mirror.tick()).toBe(0))).toEqual(NOTHING);
    expect(images.hits(path)).toBe(3);
  });

  it('mirrors a source that recovers 71 h into its failures', async () => {
    const { images } = world;
    const path = '/png/late.png';
    images.set(path, { status: 500 });
    const id = await world.putProduct('BP-40', [images.url(path)]);
    await world.mirror.tick();
    world.clock.advance(71 * HOUR);
    images.set(path, { png: 'late' });
    expect(await world.recorded(() => world.mirror.tick())).toEqual(contentOf(id));
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([world.mediaUrl(images.bytes(path), 'png')]));
  });

  it('makes a source dead at once when it answers 404 after other failures', async () => {
    const { images } = world;
    const path = '/png/removed.png';
    images.set(path, { status: 500 });
    const id = await world.putProduct('BP-40', [images.url(path)]);
    const firstFailure = world.clock.iso;
    await world.mirror.tick();
    images.set(path, { status: 404 });
    world.clock.advance(MINUTE);
    expect(await world.recorded(() => world.mirror.tick())).toEqual(contentOf(id));
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([]));
    expect((await world.status()).dead_images).toEqual([
      { url: images.url(path), last_error: 'http_404', first_failure_at: firstFailure, updated_at: world.clock.iso },
    ]);
  });
});
