// GET /media/{key} (openapi: getMedia; spec 2.1 image rule 1): the service-hosted copy of a mirrored
// image, public (no API key), content-addressed and immutable: the exact bytes with their image
// content type, a strong ETag (the quoted sha-256), a year of immutable caching, 304 on a matching
// If-None-Match, and 404 `not_found` for a key no copy has or that is not a media key. Every
// response passes through the contract harness (status, content type and headers of image/*).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalFolderMediaStore } from '../../src/images/media-store.js';
import { startImageWorld, type ImageWorld } from './world.js';

const IMMUTABLE = 'public, max-age=31536000, immutable';

let world: ImageWorld;
let png: { url: string; bytes: Buffer; sha256: string };
let jpeg: { url: string; bytes: Buffer; sha256: string };

beforeAll(async () => {
  world = await startImageWorld();
  const { images } = world;
  const id = await world.putProduct('BP-40', [images.url('/png/front.png'), images.url('/jpeg/back.jpg')]);
  await world.mirror.tick();
  const [pngUrl, jpegUrl] = await world.publicImages(id);
  const copy = (url: string | undefined, bytes: Buffer) => ({ url: url!, bytes, sha256: createHash('sha256').update(bytes).digest('hex') });
  png = copy(pngUrl, images.bytes('/png/front.png'));
  jpeg = copy(jpegUrl, images.bytes('/jpeg/back.jpg'));
});
afterAll(async () => {
  await world.close();
});

/** A GET through the contract-validating fetch, with the body as bytes. */
async function get(url: string, headers: Record<string, string> = {}) {
  const response = await world.service.fetch(url, { headers });
  return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) };
}

describe('GET /media/{key}', () => {
  it('returns the exact bytes with Content-Type image/png, the quoted sha-256 as strong ETag and immutable caching, without an API key', async () => {
    expect(png.url).toBe(`${world.service.url}/media/${png.sha256}.png`);
    const response = await get(png.url);
    expect(response.status).toBe(200);
    expect(response.bytes.equals(png.bytes)).toBe(true);
    expect(response.headers.get('content-type')).toBe('image/png');
    expect(response.headers.get('etag')).toBe(`"${png.sha256}"`);
    expect(response.headers.get('cache-control')).toBe(IMMUTABLE);
    expect(response.headers.get('content-length')).toBe(String(png.bytes.length));
  });

  it('serves a JPEG copy as image/jpeg under its .jpg key', async () => {
    expect(jpeg.url).toBe(`${world.service.url}/media/${jpeg.sha256}.jpg`);
    const response = await get(jpeg.url);
    expect(response.status).toBe(200);
    expect(response.bytes.equals(jpeg.bytes)).toBe(true);
    expect(response.headers.get('content-type')).toBe('image/jpeg');
    expect(response.headers.get('etag')).toBe(`"${jpeg.sha256}"`);
  });

  it('sends nosniff and a CSP that runs and loads nothing, on the copy and on its 304', async () => {
    for (const headers of [{}, { 'If-None-Match': `"${png.sha256}"` }] as Record<string, string>[]) {
      const response = await get(png.url, headers);
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('content-security-policy')).toMatch(/^default-src 'none';.*\bsandbox\b.*frame-ancestors 'none'/);
    }
  });

  it('does not serve a stored copy whose bytes are not the type its key names (one mirrored before the bytes were checked)', async () => {
    const html = Buffer.from('<!doctype html><script>alert(document.cookie)</script>');
    const key = `${createHash('sha256').update(html).digest('hex')}.png`;
    await new LocalFolderMediaStore(world.mediaDir).put(key, html);
    const response = await world.service.api(`/media/${key}`, null);
    expect(response.status).toBe(404);
    expect(response.body).toMatchObject({ code: 'not_found' });
  });

  it('ignores an Authorization header, even a wrong one (media URLs are public)', async () => {
    const response = await get(png.url, { Authorization: 'Bearer cps_not_a_key' });
    expect(response.status).toBe(200);
    expect(response.bytes.equals(png.bytes)).toBe(true);
  });

  describe('If-None-Match', () => {
    it.each([
      ['the ETag itself', (etag: string) => etag],
      ['the ETag as a weak tag (compared weakly)', (etag: string) => `W/${etag}`],
      ['a list holding the ETag', (etag: string) => `"0000", ${etag} , "ffff"`],
      ['a list holding the weak ETag', (etag: string) => `W/"0000",W/${etag}`],
      ['*', () => '*'],
    ])('answers 304 without a body, with the ETag and Cache-Control, for %s', async (_, header) => {
      const etag = `"${png.sha256}"`;
      const response = await get(png.url, { 'If-None-Match': header(etag) });
      expect(response.status).toBe(304);
      expect(response.bytes.length).toBe(0);
      expect(response.headers.get('etag')).toBe(etag);
      expect(response.headers.get('cache-control')).toBe(IMMUTABLE);
    });

    it.each([
      ['another ETag', `"${'0'.repeat(64)}"`],
      ['the ETag of another copy', () => `"${jpeg.sha256}"`],
      ['the sha-256 unquoted', () => png.sha256],
      ['an empty header', ''],
    ])('answers 200 with the bytes for %s', async (_, value) => {
      const header = typeof value === 'function' ? value() : value;
      const response = await get(png.url, { 'If-None-Match': header });
      expect(response.status).toBe(200);
      expect(response.bytes.equals(png.bytes)).toBe(true);
    });

    it('answers 404, not 304, for * on a key no copy has', async () => {
      const response = await world.service.api(`/media/${'a'.repeat(64)}.png`, null, { headers: { 'If-None-Match': '*' } });
      expect(response.status).toBe(404);
      expect(response.body.code).toBe('not_found');
    });
  });

  describe('not found', () => {
    it.each([
      ['an unknown key', () => `${'a'.repeat(64)}.png`],
      ['a known hash with another extension', () => `${png.sha256}.jpg`],
      ['a known hash without extension', () => png.sha256],
      ['an uppercase hash', () => `${png.sha256.toUpperCase()}.png`],
      ['a short hash', () => `${png.sha256.slice(0, 63)}.png`],
      ['an extension that is never mirrored', () => `${png.sha256}.svg`],
      ['.jpeg for .jpg', () => `${jpeg.sha256}.jpeg`],
      ['a path traversal', () => '..%2F..%2Fcatalog.db'],
    ])('answers 404 not_found as a problem for %s', async (_, key) => {
      const response = await world.service.api(`/media/${key()}`, null);
      expect(response.status).toBe(404);
      expect(response.headers.get('content-type')).toBe('application/problem+json');
      expect(response.body).toMatchObject({ status: 404, code: 'not_found' });
    });
  });
});

describe('the local media folder', () => {
  it('stores a copy again after its sub-folder was removed while the store ran (folders are made once, then again when gone)', async () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-media-'));
    try {
      const store = new LocalFolderMediaStore(folder);
      const first = Buffer.from('first copy');
      const second = Buffer.from('second copy, same prefix folder');
      const key = (bytes: Buffer, prefix: string) => `${prefix}${createHash('sha256').update(bytes).digest('hex').slice(2)}.png`;
      await store.put(key(first, 'ab'), first);
      fs.rmSync(path.join(folder, 'ab'), { recursive: true });
      await store.put(key(second, 'ab'), second);
      expect(await store.get(key(second, 'ab'))).toEqual(second);
      expect(await store.get(key(first, 'ab'))).toBeUndefined();
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });
});
