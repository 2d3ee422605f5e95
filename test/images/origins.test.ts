// Image origins isolated (docs/operating.md#image-mirroring): a merchant's origins take turns in the
// claims, so a dead supplier host's backlog never holds up its working ones; an origin failing
// CPS_IMAGE_ORIGIN_FAILURES fetches in a row is down, its images wait, and one probe per interval
// (doubling up to CPS_IMAGE_ORIGIN_PROBE_MAX_MS) tries it until the first success reopens it. Real
// image hosts on 127.0.0.1 (one answering 503, one port nothing listens on), a fake clock, the
// mirror driven by tick().
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ImageServer } from '../support/image-server.js';
import { HOUR, SECOND, startImageWorld, type ImageWorld } from './world.js';

const ORIGIN_RULES = { originFailures: 5, originProbeMs: 30 * SECOND, originProbeMaxMs: 120 * SECOND };

let world: ImageWorld | undefined;
const hosts: ImageServer[] = [];

afterEach(async () => {
  await world?.close();
  world = undefined;
  for (const host of hosts.splice(0)) await host.close();
});

async function deadHost(): Promise<ImageServer> {
  const host = await ImageServer.start();
  hosts.push(host);
  return host;
}

/** A port on 127.0.0.1 that nothing listens on (its connections are refused). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const deadPaths = Array.from({ length: 200 }, (_, i) => `/status/503/dead-${i}.png`);
const goodPaths = Array.from({ length: 5 }, (_, i) => `/png/good-${i}.png`);

async function importBacklog(w: ImageWorld, deadUrl: (path: string) => string): Promise<void> {
  // The dead origin's 200 images first, then the working origin's 5.
  await w.importProducts(Object.fromEntries(deadPaths.map((path, i) => [`D-${i}`, [deadUrl(path)]])));
  await w.importProducts(Object.fromEntries(goodPaths.map((path, i) => [`G-${i}`, [w.images.url(path)]])));
}

describe('image origins isolated from one another', () => {
  it('documents its defaults: down after 20 failures in a row, probed after 30 s, doubling up to 15 min', async () => {
    const { loadConfig } = await import('../../src/config.js');
    expect(loadConfig({}).images).toMatchObject({ originFailures: 20, originProbeMs: 30_000, originProbeMaxMs: 900_000 });
  });

  it("claims a working origin's images in the first claim, not after a dead origin's backlog queued before them", async () => {
    world = await startImageWorld({ images: ORIGIN_RULES });
    const dead = await deadHost();
    await importBacklog(world, (path) => dead.url(path));
    const now = world.clock.now();
    const claimed = await world.service.storage.claimDueImageMirrors(now.toISOString(), 2, new Date(now.getTime() + 60_000).toISOString(), {
      perMerchant: 2,
      perOrigin: 2,
      busy: [],
    });
    expect(claimed.map((image) => image.origin).sort()).toEqual([dead.origin, world.images.origin].sort());
  });

  it("mirrors the working origin's 5 images in the first round while 200 images of a refused origin wait", async () => {
    world = await startImageWorld({ images: ORIGIN_RULES });
    const port = await closedPort();
    await importBacklog(world, (path) => `http://127.0.0.1:${port}${path}`);
    const tried = await world.mirror.tick();
    expect(world.images.totalHits).toBe(5);
    expect((await world.status()).mirrored).toBe(5);
    // The rest of the round went to the refused origin until it was down.
    expect(tried - 5).toBeLessThanOrEqual(ORIGIN_RULES.originFailures + 1);
    const [origin] = await world.service.storage.imageOrigins(world.merchant.id);
    expect(origin).toMatchObject({ origin: `http://127.0.0.1:${port}`, probe_ms: 30_000 });
    expect(origin!.down_since).not.toBeNull();
  });

  it('marks an origin down after its failures in a row, attempts nothing until the probe time, and reopens it at the first successful probe', async () => {
    world = await startImageWorld({ images: ORIGIN_RULES });
    const dead = await deadHost();
    await world.importProducts(Object.fromEntries(deadPaths.map((path, i) => [`D-${i}`, [dead.url(path)]])));
    const origins = () => world!.service.storage.imageOrigins(world!.merchant.id);

    await world.mirror.tick();
    const down = dead.totalHits;
    // 5 failures in a row, and at most the one fetch already running beside the fifth.
    expect(down).toBeGreaterThanOrEqual(ORIGIN_RULES.originFailures);
    expect(down).toBeLessThanOrEqual(ORIGIN_RULES.originFailures + 1);
    expect(await origins()).toEqual([
      {
        origin: dead.origin,
        failures: down,
        down_since: world.clock.now().toISOString(),
        next_probe_at: new Date(world.clock.now().getTime() + 30 * SECOND).toISOString(),
        probe_ms: 30_000,
        last_error: 'http_503',
      },
    ]);

    // Down: no attempt until the probe is due, however often the mirror looks.
    expect(await world.mirror.tick()).toBe(0);
    world.clock.advance(29 * SECOND);
    expect(await world.mirror.tick()).toBe(0);
    expect(dead.totalHits).toBe(down);

    // One probe at its time; it fails, and the next waits twice as long.
    world.clock.advance(1 * SECOND);
    expect(await world.mirror.tick()).toBe(1);
    expect(dead.totalHits).toBe(down + 1);
    expect((await origins())[0]).toMatchObject({
      probe_ms: 60_000,
      next_probe_at: new Date(world.clock.now().getTime() + 60 * SECOND).toISOString(),
    });
    // The images that failed before are due again (their own retry wait is 60 s), and still wait.
    world.clock.advance(59 * SECOND);
    expect(await world.mirror.tick()).toBe(0);
    world.clock.advance(1 * SECOND);
    expect(await world.mirror.tick()).toBe(1);
    expect(dead.totalHits).toBe(down + 2);
    expect((await origins())[0]).toMatchObject({ probe_ms: 120_000 });
    // The wait stops at its cap.
    world.clock.advance(120 * SECOND);
    expect(await world.mirror.tick()).toBe(1);
    expect((await origins())[0]).toMatchObject({ probe_ms: 120_000 });
    expect((await world.status()).mirrored).toBe(0);

    // The host is back: the next probe succeeds, the origin is up, and its images are fetched again.
    deadPaths.forEach((path, i) => dead.set(path, { png: `back-${i}` }));
    world.clock.advance(120 * SECOND);
    const tried = await world.mirror.tick();
    expect(await origins()).toEqual([]);
    expect(tried).toBeGreaterThan(1);
    expect((await world.status()).mirrored).toBe(tried);
  });
});

/** The demo's supplier host: a name reserved for tests (RFC 6761), refused by the SSRF guard before any DNS query. */
const RESERVED_HOST = 'images.demo-supplier.test';
/** A name that is not reserved: the test's resolver answers it (ENOTFOUND, later 127.0.0.1), no DNS query is sent. */
const VANISHED_HOST = 'images.vanished-supplier.com';

/** A resolver that sends no DNS query: the names it was asked, ENOTFOUND for each until `answer` gives it an address. */
function testResolver() {
  const asked: string[] = [];
  const answers = new Map<string, string>();
  const lookup = ((hostname: string, _options: unknown, callback: (error: Error | null, addresses?: unknown) => void) => {
    asked.push(hostname);
    const address = answers.get(hostname);
    if (address === undefined) {
      callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname }));
      return;
    }
    callback(null, [{ address, family: 4 }]);
  }) as unknown as NonNullable<Parameters<typeof startImageWorld>[0]>['lookup'];
  return { lookup, asked, answer: (hostname: string, address: string) => answers.set(hostname, address) };
}

/** Ticks until a tick tries nothing more; returns how many it tried in all. */
async function drain(w: ImageWorld): Promise<number> {
  let tried = 0;
  for (let n = await w.mirror.tick(); n > 0; n = await w.mirror.tick()) tried += n;
  return tried;
}

describe('a supplier host that does not resolve, beside a working local origin', () => {
  it("mirrors the local origin's images while the reserved host's wait; down after its failures in a row, then one attempt per probe interval, doubling up to the cap", async () => {
    const resolver = testResolver();
    world = await startImageWorld({ images: ORIGIN_RULES, lookup: resolver.lookup });
    const dead = (path: string) => `http://${RESERVED_HOST}${path}`;
    await importBacklog(world, dead);
    const deadFetches = () => world!.fetched.filter((url) => url.startsWith(`http://${RESERVED_HOST}/`)).length;

    await world.mirror.tick();
    expect(world.images.totalHits).toBe(5);
    expect((await world.status()).mirrored).toBe(5);
    const down = deadFetches();
    expect(down).toBeGreaterThanOrEqual(ORIGIN_RULES.originFailures);
    expect(down).toBeLessThanOrEqual(ORIGIN_RULES.originFailures + 1);
    expect(await world.origins()).toEqual([
      {
        origin: `http://${RESERVED_HOST}`,
        state: 'down',
        failures: down,
        down_since: world.clock.iso,
        next_probe_at: new Date(world.clock.ms + 30 * SECOND).toISOString(),
        last_error: 'blocked_address',
        pending: 200,
      },
    ]);
    // Its images keep their supplier URL meanwhile.
    expect(await world.publicImages((await world.importProducts({ 'D-0': [dead(deadPaths[0]!)] }))['D-0']!)).toEqual([dead(deadPaths[0]!)]);

    // One attempt per probe interval: 30 s, 60 s, 120 s, then 120 s (the cap).
    let fetches = down;
    for (const interval of [30, 60, 120, 120]) {
      world.clock.advance((interval - 1) * SECOND);
      expect(await drain(world)).toBe(0);
      expect(deadFetches()).toBe(fetches);
      world.clock.advance(1 * SECOND);
      expect(await drain(world)).toBe(1);
      expect(deadFetches()).toBe(++fetches);
      const [origin] = await world.origins();
      expect(origin).toMatchObject({
        state: 'down',
        next_probe_at: new Date(world.clock.ms + Math.min(interval * 2, 120) * SECOND).toISOString(),
      });
    }
    // The reserved name was refused before any DNS query: the resolver was never asked.
    expect(resolver.asked).toEqual([]);
  });

  it('marks a host whose name does not resolve (ENOTFOUND) down, probes it, and reopens it at the first probe that succeeds', async () => {
    const resolver = testResolver();
    world = await startImageWorld({ images: ORIGIN_RULES, lookup: resolver.lookup });
    const vanished = await deadHost(); // where the name will resolve once it is back: a real server on 127.0.0.1
    const port = new URL(vanished.origin).port;
    const url = (path: string) => `http://${VANISHED_HOST}:${port}${path}`;
    const paths = Array.from({ length: 30 }, (_, i) => `/png/vanished-${i}.png`);
    await world.importProducts(Object.fromEntries(paths.map((path, i) => [`V-${i}`, [url(path)]])));
    await world.importProducts(Object.fromEntries(goodPaths.map((path, i) => [`G-${i}`, [world!.images.url(path)]])));

    await world.mirror.tick();
    expect((await world.status()).mirrored).toBe(5);
    expect(await world.origins()).toMatchObject([
      { origin: `http://${VANISHED_HOST}:${port}`, state: 'down', last_error: 'connection_error' },
    ]);
    const attempts = resolver.asked.length;
    expect(attempts).toBeLessThanOrEqual(ORIGIN_RULES.originFailures + 1);

    // A failed probe: the resolver still has no answer, and the next probe waits twice as long.
    world.clock.advance(30 * SECOND);
    expect(await drain(world)).toBe(1);
    expect(resolver.asked).toHaveLength(attempts + 1);
    expect((await world.origins())[0]).toMatchObject({
      state: 'down',
      next_probe_at: new Date(world.clock.ms + 60 * SECOND).toISOString(),
    });

    // The name resolves again: the next probe is mirrored, the origin is up, and its images follow.
    resolver.answer(VANISHED_HOST, '127.0.0.1');
    world.clock.advance(60 * SECOND);
    await drain(world);
    expect(await world.origins()).toEqual([]);
    expect(await world.status()).toMatchObject({ pending: 0, mirrored: 35, dead: 0 });
    expect(vanished.totalHits).toBe(30);
    // Only the test's resolver was asked, and only for that name.
    expect(new Set(resolver.asked)).toEqual(new Set([VANISHED_HOST]));
  });
});

describe("a down origin's backlog still ages", () => {
  it('makes each waiting image dead once its own time is up, never fetched, as if it had been: 72 h after its first failure, or after the origin went down, or after it was added', async () => {
    world = await startImageWorld({ images: ORIGIN_RULES });
    const dead = (path: string) => `http://${RESERVED_HOST}${path}`;
    const first = Array.from({ length: 12 }, (_, i) => `/first/${i}.png`);
    const later = Array.from({ length: 4 }, (_, i) => `/later/${i}.png`);
    const ids = await world.importProducts(Object.fromEntries(first.map((path, i) => [`F-${i}`, [dead(path)]])));
    const downAt = world.clock.ms;
    await world.mirror.tick();
    expect(await world.origins()).toMatchObject([{ state: 'down', down_since: world.clock.iso, pending: 12 }]);
    const fetchedBefore = world.fetched.length;

    // Added 10 h after the origin went down: these never fail before the origin is back, and wait.
    world.clock.advance(10 * HOUR);
    const laterIds = await world.importProducts(Object.fromEntries(later.map((path, i) => [`L-${i}`, [dead(path)]])));

    // Up to a second before 72 h: nothing dead, the supplier URLs served (one probe per interval meanwhile).
    world.clock.advance(62 * HOUR - SECOND);
    await drain(world);
    expect(await world.status()).toMatchObject({ pending: 16, dead: 0 });
    expect(await world.publicImages(ids['F-0']!)).toEqual([dead(first[0]!)]);
    const probes = world.fetched.length - fetchedBefore;

    // At 72 h: the 12 of the first import are dead (those fetched before, and those that only waited),
    // with the origin's error and a content change each, and none was fetched for it.
    world.clock.advance(1 * SECOND);
    const changes = await world.recorded(() => drain(world!));
    expect(world.fetched.length - fetchedBefore).toBe(probes);
    const status = await world.status();
    expect(status).toMatchObject({ pending: 4, dead: 12 });
    expect(status.dead_images.every((image) => image.last_error === 'blocked_address')).toBe(true);
    expect(status.dead_images.every((image) => image.first_failure_at === new Date(downAt).toISOString())).toBe(true);
    expect(
      changes.de
        .filter(([, type]) => type === 'content')
        .map(([id]) => id)
        .sort((a, b) => a - b),
    ).toEqual(Object.values(ids).sort((a, b) => a - b));
    expect(await world.publicImages(ids['F-0']!)).toEqual([]);
    expect(await world.publicImages(laterIds['L-0']!)).toEqual([dead(later[0]!)]);

    // The later ones' own time: 72 h after they were added, the origin down all along.
    world.clock.advance(10 * HOUR - SECOND);
    await drain(world);
    expect(await world.status()).toMatchObject({ pending: 4, dead: 12 });
    world.clock.advance(1 * SECOND);
    await drain(world);
    expect(await world.status()).toMatchObject({ pending: 0, dead: 16 });
    expect(await world.publicImages(laterIds['L-0']!)).toEqual([]);
    expect(world.fetched.length - fetchedBefore).toBeLessThan(probes + 5);
  });
});
