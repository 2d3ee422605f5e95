// What an image's bytes are (src/images/sniff.ts): the five accepted formats by their
// signatures, and nothing else (HTML, SVG, text, a truncated header) whatever it is labelled.
import { describe, expect, it } from 'vitest';
import { sniffImageType } from '../../src/images/sniff.js';
import { jpegOf, pngOf } from '../support/image-server.js';

const ascii = (text: string) => Buffer.from(text, 'latin1');
/** An ISO BMFF `ftyp` box: size, 'ftyp', major brand, minor version, compatible brands. */
const ftyp = (major: string, ...compatible: string[]) => {
  const body = ascii(`ftyp${major}\0\0\0\0${compatible.join('')}`);
  const size = Buffer.alloc(4);
  size.writeUInt32BE(body.length + 4);
  return Buffer.concat([size, body, Buffer.alloc(16)]);
};

describe('sniffImageType', () => {
  it.each([
    ['a JPEG', jpegOf('x'), 'image/jpeg'],
    ['a PNG', pngOf('x'), 'image/png'],
    ['a GIF87a', ascii('GIF87a\x01\x00\x01\x00'), 'image/gif'],
    ['a GIF89a', ascii('GIF89a\x01\x00\x01\x00'), 'image/gif'],
    ['a WebP', ascii('RIFF\x24\x00\x00\x00WEBPVP8 '), 'image/webp'],
    ['an AVIF (major brand)', ftyp('avif', 'mif1', 'miaf'), 'image/avif'],
    ['an AVIF sequence (compatible brand)', ftyp('mif1', 'avis', 'msf1'), 'image/avif'],
  ])('names %s by its bytes', (_, bytes, type) => {
    expect(sniffImageType(bytes)).toBe(type);
  });

  it.each([
    ['HTML', ascii('<!doctype html><script>alert(1)</script>')],
    ['SVG', ascii('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')],
    ['SVG behind an XML declaration', ascii('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>')],
    ['a RIFF that is not WebP (WAV)', ascii('RIFF\x24\x00\x00\x00WAVEfmt ')],
    ['an ISO BMFF that is not AVIF (MP4)', ftyp('isom', 'mp41')],
    ['a PNG signature cut short', pngOf('x').subarray(0, 7)],
    ['nothing', Buffer.alloc(0)],
  ])('names %s as no accepted image', (_, bytes) => {
    expect(sniffImageType(bytes)).toBeUndefined();
  });
});
