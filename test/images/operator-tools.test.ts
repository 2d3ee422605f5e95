// Mirroring progress and the retry of dead images, for operators (openapi/admin.yaml tag "Images":
// getImageMirroring, retryDeadImages; the CLI's `images status` and `images retry-dead`): counts per
// state per distinct source URL, the dead images with the error of their last fetch, newest first;
// a retry sets every dead image back to pending (the supplier URL is served again, one `content`
// change per product and store) with its failure history cleared, and the next round fetches it.
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../support/cli.js';
import { ADMIN_TOKEN } from '../support/service.js';
import { HOUR, IMAGE_DEFAULTS, MINUTE, NOTHING, byProduct, contentOf, everyStore, startImageWorld, type ImageWorld } from './world.js';

const DEAD_AFTER = IMAGE_DEFAULTS.deadAfterHours * HOUR;

let world: ImageWorld;

afterEach(async () => {
  await world.close();
});

const retryDead = () => world.service.adminApi('POST', `${world.merchant.base}/images/retry-dead`);

describe('admin API: GET .../images', () => {
  beforeEach(async () => {
    world = await startImageWorld();
  });

  it('counts the source URLs per state (an image two products list counts once) and lists the dead ones, newest first, with their last error', async () => {
    const { images } = world;
    const shared = images.url('/png/shared.png');
    const gone = images.url('/status/404/gone.png');
    const failing = images.url('/status/500/failing.png');
    await world.putProduct('P1', [shared, gone]);
    await world.putProduct('P2', [shared, failing]);
    expect(await world.status()).toEqual({ pending: 3, mirrored: 0, dead: 0, dead_images: [] });
    const firstDeath = world.clock.iso;
    await world.mirror.tick();

    world.clock.advance(HOUR);
    const removed = images.url('/status/410/removed.png');
    await world.putProduct('P3', [removed]);
    await world.mirror.tick();
    expect(await world.status()).toEqual({
      pending: 1,
      mirrored: 1,
      dead: 2,
      dead_images: [
        { url: removed, last_error: 'http_410', first_failure_at: world.clock.iso, updated_at: world.clock.iso },
        { url: gone, last_error: 'http_404', first_failure_at: firstDeath, updated_at: firstDeath },
      ],
    });
  });

  it('shows each source image of a product with its state and mirrored URL', async () => {
    const { images } = world;
    const sources = [images.url('/png/a.png'), images.url('/status/404/b.png'), images.url('/status/500/c.png')];
    await world.putProduct('P1', sources);
    await world.mirror.tick();
    expect(await world.sourceImages('P1')).toEqual([
      { url: sources[0], state: 'mirrored', mirrored_url: world.mediaUrl(images.bytes('/png/a.png'), 'png') },
      { url: sources[1], state: 'dead', mirrored_url: null },
      { url: sources[2], state: 'pending', mirrored_url: null },
    ]);
  });

  it('counts and lists only images a product still lists', async () => {
    const { images } = world;
    await world.importProducts({ P1: [images.url('/status/404/old.png')] });
    await world.mirror.tick();
    expect(await world.status()).toMatchObject({ dead: 1, dead_images: [{ url: images.url('/status/404/old.png') }] });
    // A later import replaces the dead image: nothing dead is left to show or to retry.
    const fresh = images.url('/png/fresh.png');
    await world.importProducts({ P1: [fresh] });
    expect(await world.status()).toEqual({ pending: 1, mirrored: 0, dead: 0, dead_images: [] });
    const response = await retryDead();
    expect(response.status, response.text).toBe(200);
    expect(response.body).toEqual({ retried: 0 });
  });

  it('answers 404 for an unknown merchant and 401 without the admin token', async () => {
    const unknown = await world.service.adminApi('GET', '/admin/v1/merchants/999/images');
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('not_found');
    const unknownRetry = await world.service.adminApi('POST', '/admin/v1/merchants/999/images/retry-dead');
    expect(unknownRetry.status).toBe(404);
    for (const [method, suffix] of [
      ['GET', 'images'],
      ['POST', 'images/retry-dead'],
    ] as const) {
      const anonymous = await world.service.fetch(`${world.service.url}${world.merchant.base}/${suffix}`, { method });
      expect(anonymous.status).toBe(401);
      const wrong = await world.service.fetch(`${world.service.url}${world.merchant.base}/${suffix}`, {
        method,
        headers: { Authorization: `Bearer ${ADMIN_TOKEN}x` },
      });
      expect(wrong.status).toBe(401);
    }
  });
});

describe('admin API: POST .../images/retry-dead', () => {
  beforeEach(async () => {
    world = await startImageWorld();
  });

  it('sets every dead image back to pending, serves the supplier URLs again with a content change, and the next round mirrors them', async () => {
    const { images } = world;
    const fixed = images.url('/status/404/fixed.png');
    const stillGone = images.url('/status/410/still-gone.png');
    const fine = images.url('/png/fine.png');
    const first = await world.putProduct('P1', [fixed]);
    const second = await world.putProduct('P2', [stillGone, fine]);
    await world.mirror.tick();
    const fineUrl = world.mediaUrl(images.bytes('/png/fine.png'), 'png');
    expect(await world.imagesInEveryStore(first)).toEqual(everyStore([]));
    expect(await world.imagesInEveryStore(second)).toEqual(everyStore([fineUrl]));

    // The supplier fixes one of its two dead images.
    images.set('/status/404/fixed.png', { png: 'fixed' });
    world.clock.advance(HOUR);
    const changes = await world.recorded(async () => {
      const response = await retryDead();
      expect(response.status, response.text).toBe(200);
      expect(response.body).toEqual({ retried: 2 });
    });
    expect(byProduct(changes)).toEqual(contentOf(first, second));
    expect(await world.imagesInEveryStore(first)).toEqual(everyStore([fixed]));
    expect(await world.imagesInEveryStore(second)).toEqual(everyStore([stillGone, fineUrl]));
    expect(await world.status()).toEqual({ pending: 2, mirrored: 1, dead: 0, dead_images: [] });
    expect((await world.sourceImages('P1'))[0]!.state).toBe('pending');

    // Due at once: the fixed one is mirrored, the other is dead again at once (410).
    expect(byProduct(await world.recorded(() => world.mirror.tick()))).toEqual(contentOf(first, second));
    expect(await world.imagesInEveryStore(first)).toEqual(everyStore([world.mediaUrl(images.bytes('/status/404/fixed.png'), 'png')]));
    expect(await world.imagesInEveryStore(second)).toEqual(everyStore([fineUrl]));
    expect(await world.status()).toEqual({
      pending: 0,
      mirrored: 2,
      dead: 1,
      dead_images: [{ url: stillGone, last_error: 'http_410', first_failure_at: world.clock.iso, updated_at: world.clock.iso }],
    });
  });

  it('returns 0 and records nothing when no image is dead', async () => {
    const { images } = world;
    await world.putProduct('P1', [images.url('/png/a.png'), images.url('/status/500/b.png')]);
    await world.mirror.tick();
    const changes = await world.recorded(async () => {
      const response = await retryDead();
      expect(response.status, response.text).toBe(200);
      expect(response.body).toEqual({ retried: 0 });
    });
    expect(changes).toEqual(NOTHING);
    expect(await world.status()).toEqual({ pending: 1, mirrored: 1, dead: 0, dead_images: [] });
  });

  it('clears the failure history: the dead-after period counts again from the first failure after the retry', async () => {
    const { images } = world;
    const source = images.url('/status/500/down.png');
    const id = await world.putProduct('P1', [source]);
    await world.mirror.tick();
    world.clock.advance(DEAD_AFTER);
    await world.mirror.tick();
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([]));

    world.clock.advance(HOUR);
    await retryDead();
    const firstFailure = world.clock.iso;
    await world.mirror.tick();
    // 71 h later the source would have failed for 144 h counted from the old streak: still pending.
    world.clock.advance(DEAD_AFTER - HOUR);
    expect(await world.recorded(() => world.mirror.tick())).toEqual(NOTHING);
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([source]));
    world.clock.advance(HOUR);
    expect(await world.recorded(() => world.mirror.tick())).toEqual(contentOf(id));
    expect((await world.status()).dead_images).toEqual([
      { url: source, last_error: 'http_500', first_failure_at: firstFailure, updated_at: world.clock.iso },
    ]);
  });
});

describe('CLI: images status and images retry-dead', () => {
  beforeEach(async () => {
    // The CLI runs on the real clock: the world's fake clock starts at the real time.
    world = await startImageWorld({ start: new Date().toISOString() });
  });

  /** Runs the CLI on the world's database (SQLite: --db with the file; PostgreSQL: CPS_DATABASE_URL); never rejects on a non-zero exit. */
  function cli(...args: string[]): Promise<CliResult> {
    const { database } = world.service;
    return runCli([...args, ...(database.engine === 'sqlite' ? ['--db', database.location] : [])], {
      CPS_DB_PATH: path.join(world.service.dir, 'unused.db'),
      ...(database.engine === 'sqlite' ? {} : database.env),
    });
  }

  it('images status --merchant prints the counts and dead images the admin API shows; retry-dead --merchant sets them back to pending', async () => {
    const { images } = world;
    const gone = images.url('/status/404/gone.png');
    const first = await world.putProduct('P1', [images.url('/png/a.png'), gone]);
    const second = await world.putProduct('P2', [gone, images.url('/status/500/b.png')]);
    await world.mirror.tick();

    const status = await cli('images', 'status', '--merchant', String(world.merchant.id));
    expect(status.code, status.stderr).toBe(0);
    const shown = { ...(await world.status()), origins: await world.origins() };
    expect(shown).toMatchObject({ pending: 1, mirrored: 1, dead: 1 });
    expect(JSON.parse(status.stdout)).toEqual(shown);
    const compact = await cli('images', 'status', '--merchant', String(world.merchant.id), '--json');
    expect(compact.stdout.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(compact.stdout)).toEqual(shown);

    images.set('/status/404/gone.png', { png: 'back' });
    const changes = await world.recorded(async () => {
      const retried = await cli('images', 'retry-dead', '--merchant', String(world.merchant.id));
      expect(retried.code, retried.stderr).toBe(0);
      expect(JSON.parse(retried.stdout)).toEqual({ retried: 1 });
    });
    expect(byProduct(changes)).toEqual(contentOf(first, second));
    expect(await world.imagesInEveryStore(second)).toEqual(everyStore([gone, images.url('/status/500/b.png')]));
    expect(await world.status()).toEqual({ pending: 2, mirrored: 1, dead: 0, dead_images: [] });

    // Queued at the CLI's (real) now: due for the worker once its clock has passed it.
    world.clock.advance(MINUTE);
    await world.mirror.tick();
    const back = world.mediaUrl(images.bytes('/status/404/gone.png'), 'png');
    expect(await world.imagesInEveryStore(second)).toEqual(everyStore([back, images.url('/status/500/b.png')]));
  });

  it('fails with exit code 2 without --merchant or for an unknown merchant', async () => {
    // Four refused runs, independent of each other: side by side.
    const runs = ['status', 'retry-dead'].flatMap((command) => [cli('images', command), cli('images', command, '--merchant', '999')]);
    for (const [i, result] of (await Promise.all(runs)).entries()) {
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(i % 2 === 0 ? /--merchant/ : /error: /);
    }
  });
});
