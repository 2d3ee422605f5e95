// One spelling per IP address (src/shared/canonical-address.ts), the one the sign-in throttle and
// the trusted proxies compare: RFC 5952 for IPv6, and an IPv4-mapped IPv6 address is its IPv4 address.
import { describe, expect, it } from 'vitest';
import { canonicalAddress } from '../../src/shared/canonical-address.js';

describe('canonicalAddress', () => {
  it.each([
    ['2001:db8::a2', '2001:db8::a2'],
    ['2001:db8:0:0:0:0:0:a2', '2001:db8::a2'],
    ['2001:0DB8:0000::00A2', '2001:db8::a2'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['::ffff:198.51.100.43', '198.51.100.43'],
    ['::FFFF:c633:642b', '198.51.100.43'],
    ['0:0:0:0:0:ffff:198.51.100.43', '198.51.100.43'],
    ['198.51.100.43', '198.51.100.43'],
    ['fe80::1%eth0', 'fe80::1%eth0'],
  ])('spells %s as %s', (text, canonical) => {
    expect(canonicalAddress(text)).toBe(canonical);
  });

  it('is undefined for what is no IP address', () => {
    for (const text of ['unknown', '198.51.100.043', '2001:db8::g', '', '[::1]']) expect(canonicalAddress(text)).toBeUndefined();
  });
});
