// Image mirroring (spec 2.1 image rules 1 and 2, 3 image state; docs/decisions.md#images): a
// supplier image is served by its supplier URL until the worker has copied it, then by the
// service URL of the content-addressed copy. Each transition re-resolves the products showing the
// image in every store and records one `content` change each, in the transaction of the state
// change. Observed through GET /v1/products and GET /v1/changes over real HTTP.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CatalogPublisher } from '../../src/catalog/publish.js';
import { LocalFolderMediaStore } from '../../src/images/media-store.js';
import { HttpImageFetcher, ImageMirror } from '../../src/images/mirror.js';
import { retryDeadImages } from '../../src/images/retry.js';
import { AddressGuard } from '../../src/outbound/address-guard.js';
import { until } from '../faults/harness.js';
import { CatalogStorageProxyError, failingOn } from './failing-storage.js';
import { MINUTE, NOTHING, byProduct, contentOf, everyStore, startImageWorld, type ImageWorld } from './world.js';
import { jpegOf } from '../support/image-server.js';

let world: ImageWorld;

beforeEach(async () => {
  world = await startImageWorld();
});
afterEach(async () => {
  await world.close();
});

describe('not mirrored, then mirrored', () => {
  it('serves the supplier URL until the image is mirrored (image rule 2)', async () => {
    const { images } = world;
    const url = images.url('/png/backpack.png');
    const id = await world.putProduct('BP-40', [url]);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([url]));
    expect(await world.sourceImages('BP-40')).toEqual([{ url, state: 'pending', mirrored_url: null }]);
    expect(images.hits('/png/backpack.png')).toBe(0);
  });

  it('serves the service URL of the sha-256 copy once mirrored (image rule 1), with one content change per store', async () => {
    const { images } = world;
    const url = images.url('/png/backpack.png');
    const id = await world.putProduct('BP-40', [url]);
    // A product that does not list the image is not re-published.
    await world.putProduct('BYSTANDER', [images.url('/png/other.png')]);
    images.set('/png/other.png', { status: 500 });
    const before = await world.service.api(`/v1/products/${id}?store=pl`, world.merchant.key);
    const changes = await world.recorded(() => world.mirror.tick());
    expect(changes).toEqual(contentOf(id));
    const mediaUrl = world.mediaUrl(images.bytes('/png/backpack.png'), 'png');
    // The images list is the only thing that changes.
    const after = await world.service.api(`/v1/products/${id}?store=pl`, world.merchant.key);
    expect(after.body.data).toEqual({ ...before.body.data, images: [mediaUrl] });
    expect(mediaUrl).toMatch(new RegExp(`^${world.service.url}/media/[0-9a-f]{64}\\.png$`));
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([mediaUrl]));
    expect(await world.sourceImages('BP-40')).toEqual([{ url, state: 'mirrored', mirrored_url: mediaUrl }]);
    expect(images.hits('/png/backpack.png')).toBe(1);
  });

  it('mirrors a JPEG under a .jpg key and keeps the supplied order among mirrored and not yet mirrored images', async () => {
    const { images } = world;
    const jpeg = images.url('/jpeg/front.jpg');
    const later = images.url('/png/later.png');
    const id = await world.putProduct('BP-40', [jpeg, later]);
    // The later image fails once (a switchable source), so the first is mirrored on its own.
    images.set('/png/later.png', { status: 503 });
    expect(await world.recorded(() => world.mirror.tick())).toEqual(contentOf(id));
    const jpegUrl = world.mediaUrl(images.bytes('/jpeg/front.jpg'), 'jpg');
    expect(jpegUrl).toMatch(/\.jpg$/);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([jpegUrl, later]));

    images.set('/png/later.png', { png: 'later' });
    world.clock.advance(MINUTE);
    expect(await world.recorded(() => world.mirror.tick())).toEqual(contentOf(id));
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([jpegUrl, world.mediaUrl(images.bytes('/png/later.png'), 'png')]));
  });

  it('keeps a JPEG its supplier labels image/png as what its bytes are: a .jpg copy served as image/jpeg', async () => {
    const { images } = world;
    images.set('/mislabelled/front.png', { contentType: 'image/png', body: jpegOf('mislabelled') });
    const id = await world.putProduct('BP-40', [images.url('/mislabelled/front.png')]);
    await world.mirror.tick();
    const url = world.mediaUrl(jpegOf('mislabelled'), 'jpg');
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([url]));
    const response = await world.service.fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('image/jpeg');
  });

  it('does not fetch a mirrored image again and records nothing more', async () => {
    const { images } = world;
    const id = await world.putProduct('BP-40', [images.url('/png/backpack.png')]);
    await world.mirror.tick();
    const served = await world.imagesInEveryStore(id);
    world.clock.advance(100 * 24 * 60 * MINUTE);
    expect(await world.recorded(async () => expect(await world.mirror.tick()).toBe(0))).toEqual(NOTHING);
    expect(images.hits('/png/backpack.png')).toBe(1);
    expect(await world.imagesInEveryStore(id)).toEqual(served);
  });

  it('records nothing when a product write leaves its already mirrored image as it is', async () => {
    const { images } = world;
    const url = images.url('/png/backpack.png');
    const id = await world.putProduct('BP-40', [url]);
    await world.mirror.tick();
    expect(await world.recorded(() => world.putProduct('BP-40', [url]))).toEqual(NOTHING);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([world.mediaUrl(images.bytes('/png/backpack.png'), 'png')]));
  });
});

describe('the worker', () => {
  it('fetches at most config.images.concurrency images at once and tries every due image in one round', async () => {
    const { images, service } = world;
    expect(service.config.images.concurrency).toBe(2);
    const slow = ['a', 'b', 'c', 'd', 'e'].map((name) => `/slow/${name}.png`);
    await world.putProduct(
      'SLOW',
      slow.map((p) => images.url(p)),
    );
    // Each hangs until the time-out (300 ms here: nothing answers): three rounds of two, two and one fetch.
    expect(await world.otherMirror({ timeoutMs: 300 }).tick()).toBe(5);
    expect(slow.map((p) => images.hits(p))).toEqual([1, 1, 1, 1, 1]);
    expect(images.maxInFlight).toBe(2);
    expect(await world.status()).toMatchObject({ pending: 5, mirrored: 0, dead: 0 });
  });

  it('ends the fetches in flight when stopped, without waiting for their time-out, and gives their images back due as before, no attempt counted', async () => {
    const { images, service, clock } = world;
    // A time-out far past the test's own: stop() returning at all shows it did not wait for it.
    const config = { ...service.config.images, timeoutMs: 10 * 60_000 };
    const mirror = new ImageMirror(
      service.storage,
      new LocalFolderMediaStore(service.config.images.mediaDir),
      new HttpImageFetcher(new AddressGuard(['127.0.0.1']), config),
      config,
      service.url,
      clock.now,
      new CatalogPublisher(clock.now, 2000),
    );
    images.set('/hang/tent.png', 'hang-before-headers');
    await world.putProduct('HANG', [images.url('/hang/tent.png')]);
    mirror.start();
    await until(
      () => images.hits('/hang/tent.png') === 1,
      5000,
      () => 'the fetch did not start',
    );
    await mirror.stop();
    expect(await world.status()).toMatchObject({ pending: 1, mirrored: 0, dead: 0 });
    // Due at once again (the lease given back), as it was before the claim, with no failure recorded.
    const [again] = await service.storage.claimDueImageMirrors(clock.now().toISOString(), 1, clock.now().toISOString());
    expect(again).toMatchObject({
      url: images.url('/hang/tent.png'),
      state: 'pending',
      attempts: 0,
      first_failure_at: null,
      last_error: null,
    });
  });
});

describe('content-addressed copies', () => {
  it('fetches an image that two products list once, changes both products in every store, and stores one copy', async () => {
    const { images } = world;
    const url = images.url('/png/shared.png');
    const first = await world.putProduct('BP-40', [url]);
    const second = await world.putProduct('BP-55', [images.url('/png/own.png'), url]);
    const changes = await world.recorded(() => world.mirror.tick());
    // Two transitions fetched together share a commit: the shared image changes both products, the
    // own image the second in the same re-publish (one change each).
    expect(byProduct(changes)).toEqual({
      de: [
        [first, 'content'],
        [second, 'content'],
      ],
      pl: [
        [first, 'content'],
        [second, 'content'],
      ],
    });
    const shared = world.mediaUrl(images.bytes('/png/shared.png'), 'png');
    expect(await world.imagesInEveryStore(first)).toEqual(everyStore([shared]));
    expect(await world.imagesInEveryStore(second)).toEqual(everyStore([world.mediaUrl(images.bytes('/png/own.png'), 'png'), shared]));
    expect(images.hits('/png/shared.png')).toBe(1);
    expect(world.mediaFiles()).toHaveLength(2);
    expect(await world.status()).toMatchObject({ pending: 0, mirrored: 2, dead: 0 });
  });

  it('stores identical bytes from different source URLs once, under one media URL, even when fetched at the same time', async () => {
    const { images } = world;
    // Two supplier URLs serving the same bytes, mirrored concurrently in one round.
    images.set('/png/copy-a.png', { png: 'same' });
    images.set('/png/copy-b.png', { png: 'same' });
    const a = await world.putProduct('A', [images.url('/png/copy-a.png')]);
    const b = await world.putProduct('B', [images.url('/png/copy-b.png')]);
    expect(byProduct(await world.recorded(() => world.mirror.tick()))).toEqual(contentOf(a, b));
    const same = world.mediaUrl(images.bytes('/png/copy-a.png'), 'png');
    expect(await world.imagesInEveryStore(a)).toEqual(everyStore([same]));
    expect(await world.imagesInEveryStore(b)).toEqual(everyStore([same]));
    expect(world.mediaFiles()).toEqual([same.split('/').pop()]);
    expect(await world.status()).toMatchObject({ pending: 0, mirrored: 2, dead: 0 });
  });
});

describe('a later import that changes an image URL', () => {
  it('starts the new URL over: served as the supplier URL until mirrored', async () => {
    const { images } = world;
    const { P1 } = await world.importProducts({ P1: [images.url('/png/v1.png')] });
    await world.mirror.tick();
    const v1 = world.mediaUrl(images.bytes('/png/v1.png'), 'png');
    expect(await world.imagesInEveryStore(P1!)).toEqual(everyStore([v1]));

    const v2Source = images.url('/png/v2.png');
    // The import itself is a content change (the images list changed): the new URL as supplied.
    expect(await world.recorded(() => world.importProducts({ P1: [v2Source] }))).toEqual(contentOf(P1!));
    expect(await world.imagesInEveryStore(P1!)).toEqual(everyStore([v2Source]));
    expect(await world.sourceImages('P1')).toEqual([{ url: v2Source, state: 'pending', mirrored_url: null }]);

    expect(await world.recorded(() => world.mirror.tick())).toEqual(contentOf(P1!));
    expect(await world.imagesInEveryStore(P1!)).toEqual(everyStore([world.mediaUrl(images.bytes('/png/v2.png'), 'png')]));
  });

  it('starts the new URL over even when the old one was dead', async () => {
    const { images } = world;
    const { P1 } = await world.importProducts({ P1: [images.url('/status/404/old.png')] });
    await world.mirror.tick();
    expect(await world.imagesInEveryStore(P1!)).toEqual(everyStore([]));
    const fresh = images.url('/png/fresh.png');
    await world.importProducts({ P1: [fresh] });
    expect(await world.imagesInEveryStore(P1!)).toEqual(everyStore([fresh]));
    await world.mirror.tick();
    expect(await world.imagesInEveryStore(P1!)).toEqual(everyStore([world.mediaUrl(images.bytes('/png/fresh.png'), 'png')]));
  });
});

describe('one transaction with the state change', () => {
  it.each([
    ['mirrored', '/png/backpack.png'],
    ['dead', '/status/404/backpack.png'],
  ])('leaves the image not mirrored, and nothing recorded, when recording its change to %s fails', async (_, path) => {
    const { images } = world;
    const url = images.url(path);
    const id = await world.putProduct('BP-40', [url]);
    const broken = world.otherMirror({ storage: failingOn(world.service.storage, 'recordChanges') });
    // The failure is logged and the round goes on; the image stays as it was.
    const changes = await world.recorded(() => expect(broken.tick()).resolves.toBe(1));
    expect(changes).toEqual(NOTHING);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([url]));
    expect(await world.sourceImages('BP-40')).toEqual([{ url, state: 'pending', mirrored_url: null }]);

    // Still due: the next round (with a working storage) makes the transition, with its changes.
    expect(await world.recorded(() => world.mirror.tick())).toEqual(contentOf(id));
    expect((await world.sourceImages('BP-40'))[0]!.state).not.toBe('pending');
  });

  it('leaves dead images dead, and nothing recorded, when recording the changes of a retry fails', async () => {
    const { images } = world;
    const url = images.url('/status/410/backpack.png');
    const id = await world.putProduct('BP-40', [url]);
    await world.mirror.tick();
    const broken = failingOn(world.service.storage, 'recordChanges');
    const changes = await world.recorded(() =>
      expect(retryDeadImages(broken, world.service.admin.publisher, world.merchant.id, world.clock.now())).rejects.toThrow(
        CatalogStorageProxyError,
      ),
    );
    expect(changes).toEqual(NOTHING);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([]));
    expect(await world.status()).toMatchObject({ pending: 0, dead: 1 });
  });
});
