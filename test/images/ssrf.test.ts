// The SSRF guard of image fetches (the webhook deliveries' guard, config.webhooks.allowHosts as its
// allowlist): an image on a loopback, private or link-local address, or on a reserved name, is
// never fetched; the failure is `blocked_address`, retried like any other failure until the source
// is dead. The image host on 127.0.0.1 counts every request, so "never fetched" is observed.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AddressGuard } from '../../src/outbound/address-guard.js';
import { HOUR, IMAGE_DEFAULTS, NOTHING, everyStore, startImageWorld, type ImageWorld } from './world.js';

let world: ImageWorld;

beforeEach(async () => {
  world = await startImageWorld();
});
afterEach(async () => {
  await world.close();
});

const DEAD_AFTER = IMAGE_DEFAULTS.deadAfterHours * HOUR;

describe('SSRF guard', () => {
  it('never fetches an image on an internal address or a reserved name without the allowlist (blocked_address)', async () => {
    const { images } = world;
    const port = new URL(images.origin).port;
    const sources = [
      'http://10.0.0.1/catalog/a.png',
      'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
      images.url('/png/internal.png'),
      `http://[::1]:${port}/png/internal.png`,
      `http://[::ffff:127.0.0.1]:${port}/png/internal.png`,
      `http://2130706433:${port}/png/internal.png`,
      `http://localhost:${port}/png/internal.png`,
      `http://images.supplier.test:${port}/png/internal.png`,
    ];
    const id = await world.putProduct('BP-40', sources);
    const unguarded = world.otherMirror({ guard: new AddressGuard([]) });

    expect(await world.recorded(() => unguarded.tick())).toEqual(NOTHING);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore(sources));
    world.clock.advance(DEAD_AFTER);
    await unguarded.tick();

    expect(images.totalHits).toBe(0);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([]));
    const status = await world.status();
    expect(status).toMatchObject({ pending: 0, mirrored: 0, dead: sources.length });
    expect(Object.fromEntries(status.dead_images.map((d) => [d.url, d.last_error]))).toEqual(
      Object.fromEntries(sources.map((url) => [url, 'blocked_address'])),
    );
  });

  it('lifts the checks only for allowlisted hosts', async () => {
    const { images } = world;
    const allowed = images.url('/png/allowed.png');
    const internal = 'http://10.0.0.1/catalog/a.png';
    const id = await world.putProduct('BP-40', [internal, allowed]);
    // world.mirror allowlists 127.0.0.1 only.
    await world.mirror.tick();
    expect(images.hits('/png/allowed.png')).toBe(1);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([internal, world.mediaUrl(images.bytes('/png/allowed.png'), 'png')]));
    world.clock.advance(DEAD_AFTER);
    await world.mirror.tick();
    expect((await world.status()).dead_images.map((d) => [d.url, d.last_error])).toEqual([[internal, 'blocked_address']]);
  });
});
