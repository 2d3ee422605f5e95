// What a receiver answers is stored as valid text on both engines: U+0000, lone
// surrogates and bytes that are not UTF-8 become U+FFFD; everything else is kept as it came.
import { describe, expect, it } from 'vitest';
import { validText, validTextOfBytes } from '../../src/shared/valid-text.js';

describe('validText', () => {
  it('replaces U+0000 and lone surrogates with U+FFFD and keeps pairs, keeping the length', () => {
    const text = 'a\u0000b\ud800c\udc00d\ud83d\ude00e\udbff';
    expect(validText(text)).toBe('a\uFFFDb\uFFFDc\uFFFDd\ud83d\ude00e\uFFFD');
    expect(validText(text)).toHaveLength(text.length);
  });

  it('leaves valid text as it is', () => {
    const text = 'Service Unavailable: Übergröße 😀 \u0001\t\n';
    expect(validText(text)).toBe(text);
  });
});

describe('validTextOfBytes', () => {
  it('decodes UTF-8, with NUL and every invalid sequence (WHATWG decoder) as U+FFFD, and keeps a byte order mark', () => {
    const bytes = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from('err'),
      Buffer.from([0x00, 0xff, 0xfe, 0xed, 0xa0, 0x80, 0xc3]),
      Buffer.from('€nd'),
    ]);
    expect(validTextOfBytes(bytes)).toBe(`\uFEFFerr${'\uFFFD'.repeat(7)}€nd`);
  });

  it('reads a multi-byte character cut off at the end as U+FFFD', () => {
    expect(validTextOfBytes(Buffer.from('ab€').subarray(0, 4))).toBe('ab\uFFFD');
  });
});
