// The SSRF guard (src/outbound/address-guard.ts) is an allow-list: only globally routable unicast
// addresses are ever connected to. Every IANA special-purpose range, IPv4 and IPv6
// (iana-ipv4-special-registry, iana-ipv6-special-registry, plus multicast and the deprecated
// site-local and IPv4-compatible forms), is refused at registration (a receiver or image URL) and
// at connection time (the addresses DNS returns, and IP literals); addresses that carry an IPv4
// address (IPv4-mapped and -translated, NAT64, 6to4, Teredo) are judged by the address they carry.
// Each range is tried at its first and last address and, where it helps, inside; the globally
// routable neighbours just outside are accepted.
import type dns from 'node:dns';
import { isIP } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { AddressGuard, addressProblem } from '../../src/outbound/address-guard.js';
import { GuardedHttpClient } from '../../src/outbound/client.js';

/** [range, what it is, addresses in it]: every one of them refused. */
const REFUSED_V4: [string, string, string[]][] = [
  ['0.0.0.0/8', '"this network"', ['0.0.0.0', '0.1.2.3', '0.255.255.255']],
  ['10.0.0.0/8', 'private use', ['10.0.0.0', '10.0.0.1', '10.255.255.255']],
  ['100.64.0.0/10', 'shared address space (CGNAT)', ['100.64.0.0', '100.100.100.200', '100.127.255.255']],
  ['127.0.0.0/8', 'loopback', ['127.0.0.0', '127.0.0.1', '127.255.255.255']],
  ['169.254.0.0/16', 'link-local', ['169.254.0.0', '169.254.169.254', '169.254.255.255']],
  ['172.16.0.0/12', 'private use', ['172.16.0.0', '172.20.1.1', '172.31.255.255']],
  ['192.0.0.0/24', 'IETF protocol assignments', ['192.0.0.0', '192.0.0.255']],
  ['192.0.0.0/29', 'IPv4 service continuity prefix (DS-Lite)', ['192.0.0.1', '192.0.0.7']],
  ['192.0.0.8/32', 'IPv4 dummy address', ['192.0.0.8']],
  ['192.0.0.9/32', 'Port Control Protocol anycast', ['192.0.0.9']],
  ['192.0.0.10/32', 'TURN anycast', ['192.0.0.10']],
  ['192.0.0.170/32', 'NAT64/DNS64 discovery', ['192.0.0.170']],
  ['192.0.0.171/32', 'NAT64/DNS64 discovery', ['192.0.0.171']],
  ['192.0.2.0/24', 'documentation (TEST-NET-1)', ['192.0.2.0', '192.0.2.255']],
  ['192.31.196.0/24', 'AS112-v4', ['192.31.196.0', '192.31.196.255']],
  ['192.52.193.0/24', 'AMT', ['192.52.193.0', '192.52.193.255']],
  ['192.88.99.0/24', 'deprecated 6to4 relay anycast', ['192.88.99.0', '192.88.99.1', '192.88.99.255']],
  ['192.168.0.0/16', 'private use', ['192.168.0.0', '192.168.1.20', '192.168.255.255']],
  ['192.175.48.0/24', 'direct delegation AS112 service', ['192.175.48.0', '192.175.48.255']],
  ['198.18.0.0/15', 'benchmarking', ['198.18.0.0', '198.19.255.255']],
  ['198.51.100.0/24', 'documentation (TEST-NET-2)', ['198.51.100.0', '198.51.100.255']],
  ['203.0.113.0/24', 'documentation (TEST-NET-3)', ['203.0.113.0', '203.0.113.255']],
  ['224.0.0.0/4', 'multicast', ['224.0.0.0', '224.0.0.251', '239.255.255.255']],
  ['240.0.0.0/4', 'reserved', ['240.0.0.0', '250.1.2.3', '255.255.255.254']],
  ['255.255.255.255/32', 'limited broadcast', ['255.255.255.255']],
];

const REFUSED_V6: [string, string, string[]][] = [
  ['::/128', 'unspecified', ['::']],
  ['::1/128', 'loopback', ['::1']],
  ['::/96', 'IPv4-compatible (deprecated), whatever it carries', ['::2', '::127.0.0.1', '::8.8.8.8', '::ffff']],
  [
    '::ffff:0:0/96',
    'IPv4-mapped, carrying a special-purpose IPv4 address',
    [
      '::ffff:0.0.0.0',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      '::ffff:169.254.169.254',
      '::ffff:100.64.0.1',
      '::ffff:192.0.0.171',
      '::ffff:255.255.255.255',
    ],
  ],
  [
    '::ffff:0:0:0/96',
    'IPv4-translated, carrying a special-purpose IPv4 address',
    ['::ffff:0:0:0', '::ffff:0:7f00:1', '::ffff:0:a00:1', '::ffff:0:a9fe:a9fe', '::ffff:0:ffff:ffff'],
  ],
  [
    '64:ff9b::/96',
    'NAT64 well-known prefix, carrying a special-purpose IPv4 address',
    ['64:ff9b::', '64:ff9b::127.0.0.1', '64:ff9b::a00:1', '64:ff9b::c0a8:101', '64:ff9b::ffff:ffff'],
  ],
  [
    '64:ff9b:1::/48',
    'local-use NAT64 (not globally reachable), whatever it carries',
    ['64:ff9b:1::', '64:ff9b:1::7f00:1', '64:ff9b:1::808:808', '64:ff9b:1:ffff:ffff:ffff:ffff:ffff'],
  ],
  ['100::/64', 'discard-only', ['100::', '100::1', '100::ffff:ffff:ffff:ffff']],
  ['100:0:0:1::/64', 'dummy IPv6 prefix', ['100:0:0:1::', '100:0:0:1:ffff:ffff:ffff:ffff']],
  ['2001::/23', 'IETF protocol assignments', ['2001:100::1', '2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff']],
  [
    '2001::/32',
    'Teredo, carrying a special-purpose server or client address',
    [
      '2001::', // server 0.0.0.0, client 255.255.255.255
      '2001:0:4136:e378:8000:63bf:3fff:fdd2', // RFC 4380's example: client 192.0.2.45 (TEST-NET-1)
      '2001:0:7f00:1:0:0:f7f7:f7f7', // server 127.0.0.1, client 8.8.8.8
      '2001:0:808:808:0:0:80ff:fffe', // server 8.8.8.8, client 127.0.0.1
      '2001:0:808:808:0:0:f5ff:fffe', // client 10.0.0.1
      '2001:0:808:808:0:0:5601:5601', // client 169.254.169.254
    ],
  ],
  ['2001:1::1/128', 'Port Control Protocol anycast', ['2001:1::1']],
  ['2001:1::2/128', 'TURN anycast', ['2001:1::2']],
  ['2001:1::3/128', 'DNS-SD service registration protocol anycast', ['2001:1::3']],
  ['2001:2::/48', 'benchmarking', ['2001:2::', '2001:2:0:ffff:ffff:ffff:ffff:ffff']],
  ['2001:3::/32', 'AMT', ['2001:3::', '2001:3:ffff:ffff:ffff:ffff:ffff:ffff']],
  ['2001:4:112::/48', 'AS112-v6', ['2001:4:112::', '2001:4:112:ffff:ffff:ffff:ffff:ffff']],
  ['2001:10::/28', 'deprecated ORCHID', ['2001:10::', '2001:1f:ffff:ffff:ffff:ffff:ffff:ffff']],
  ['2001:20::/28', 'ORCHIDv2', ['2001:20::', '2001:2f:ffff:ffff:ffff:ffff:ffff:ffff']],
  ['2001:30::/28', 'drone remote ID DETs', ['2001:30::', '2001:3f:ffff:ffff:ffff:ffff:ffff:ffff']],
  ['2001:db8::/32', 'documentation', ['2001:db8::', '2001:db8::1', '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff']],
  [
    '2002::/16',
    '6to4, carrying a special-purpose IPv4 address',
    ['2002::', '2002:7f00:1::', '2002:7f00:1::1', '2002:a00:1:ffff:ffff:ffff:ffff:ffff', '2002:a9fe:a9fe::', '2002:ffff:ffff::'],
  ],
  ['2620:4f:8000::/48', 'direct delegation AS112 service', ['2620:4f:8000::', '2620:4f:8000:ffff:ffff:ffff:ffff:ffff']],
  ['3fff::/20', 'documentation', ['3fff::', '3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff']],
  ['5f00::/16', 'segment routing (SRv6) SIDs', ['5f00::', '5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff']],
  ['fc00::/7', 'unique local', ['fc00::', 'fd12:3456::1', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff']],
  ['fec0::/10', 'site-local (deprecated)', ['fec0::', 'fec0::1', 'feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff']],
  ['fe80::/10', 'link-local', ['fe80::', 'fe80::1', 'febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff']],
  ['ff00::/8', 'multicast', ['ff00::', 'ff02::1', 'ff0e::1', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff']],
  ['outside 2000::/3', 'not global unicast', ['1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '4000::', '4000::1', 'e000::1']],
];

/** Globally routable unicast, among them the neighbours just outside the refused ranges. */
const ACCEPTED = [
  '1.1.1.1',
  '8.8.8.8',
  '9.255.255.255',
  '11.0.0.0',
  '100.63.255.255',
  '100.128.0.0',
  '126.255.255.255',
  '128.0.0.0',
  '169.253.255.255',
  '169.255.0.0',
  '172.15.255.255',
  '172.32.0.0',
  '192.0.1.0',
  '192.0.3.0',
  '192.88.98.255',
  '192.88.100.0',
  '192.167.255.255',
  '192.169.0.0',
  '198.17.255.255',
  '198.20.0.0',
  '198.51.99.255',
  '203.0.112.255',
  '203.0.114.0',
  '223.255.255.255',
  '2000::',
  '2001:200::',
  '2001:4860:4860::8888',
  '2001:db7:ffff:ffff:ffff:ffff:ffff:ffff',
  '2001:db9::',
  '2003::1',
  '2606:4700:4700::1111',
  '2620:4f:7fff:ffff:ffff:ffff:ffff:ffff',
  '2620:4f:8001::',
  '2a00:1450:4001:80b::200e',
  '3ffe:ffff::1',
  '3fff:1000::', // just past 3fff::/20
  // Carrying a globally routable IPv4 address.
  '::ffff:8.8.8.8',
  '::ffff:0:808:808',
  '64:ff9b::808:808',
  '2002:808:808::1',
  '2001:0:4136:e378:8000:63bf:f7f7:f7f7', // Teredo: server 65.54.227.120, client 8.8.8.8
];

const guard = new AddressGuard([]);
const hostOf = (address: string) => (isIP(address) === 6 ? `[${address}]` : address);
const cases = (table: [string, string, string[]][]) =>
  table.flatMap(([range, what, addresses]) => addresses.map((a) => [range, what, a] as const));
const REFUSED = [...cases(REFUSED_V4), ...cases(REFUSED_V6)];

describe('the SSRF guard refuses every special-purpose range', () => {
  it.each(REFUSED)('%s (%s): %s, at registration', (_, __, address) => {
    expect(addressProblem(address)).not.toBeNull();
    expect(guard.urlProblem(`https://${hostOf(address)}/hooks`)).not.toBeNull();
    expect(guard.urlProblem(`https://${hostOf(address)}:8443/catalog/image.png`)).not.toBeNull();
  });

  it.each(REFUSED)('%s (%s): %s, at connection time', (_, __, address) => {
    expect(guard.isBlockedConnection('hooks.shop-receiver.com', address)).toBe(true);
    expect(guard.isBlockedLiteral(new URL(`https://${hostOf(address)}/hooks`))).toBe(true);
  });

  it.each(ACCEPTED)('accepts the globally routable unicast address %s', (address) => {
    expect(addressProblem(address)).toBeNull();
    expect(guard.urlProblem(`https://${hostOf(address)}/hooks`)).toBeNull();
    expect(guard.isBlockedConnection('hooks.shop-receiver.com', address)).toBe(false);
  });

  it('refuses what is not an address, and an address with a zone', () => {
    for (const text of ['', 'localhost', '1.2.3', '::g', 'fe80::1%eth0', '2606:4700::1%1', '1:2:3:4:5:6:7:8:9']) {
      expect(guard.isBlockedConnection('hooks.shop-receiver.com', text), text).toBe(true);
    }
  });

  it('lifts the check only for allowlisted hosts', () => {
    const local = new AddressGuard(['127.0.0.1', 'receiver.internal']);
    expect(local.isBlockedConnection('127.0.0.1', '127.0.0.1')).toBe(false);
    expect(local.isBlockedConnection('receiver.internal', '10.0.0.1')).toBe(false);
    expect(local.isBlockedConnection('other.internal', '10.0.0.1')).toBe(true);
    expect(local.isBlockedConnection('other.internal', '2002:7f00:1::')).toBe(true);
  });
});

describe('the guarded client refuses them at connection time', () => {
  // DNS answers every name with the address under test: the guard checks what DNS returned.
  let answer = '';
  const lookups: string[] = [];
  const lookup = ((hostname: string, _options: unknown, callback: (e: Error | null, a: dns.LookupAddress[]) => void) => {
    lookups.push(hostname);
    callback(null, [{ address: answer, family: isIP(answer) }]);
  }) as unknown as typeof dns.lookup;
  const client = new GuardedHttpClient(guard, { timeoutMs: 2000, connections: 1, lookup });
  afterAll(() => client.close());

  it.each(REFUSED)('%s (%s): a name resolving to %s is never connected to (blocked_address)', async (_, __, address) => {
    answer = address;
    const before = lookups.length;
    const exchange = await client.exchange('https://hooks.shop-receiver.com/catalog', { method: 'POST', body: '{}' }, async () => 'sent');
    expect(exchange).toMatchObject({ ok: false, error: 'blocked_address' });
    expect(lookups.length).toBe(before + 1);
  });

  it.each(REFUSED)('%s (%s): the IP literal %s is refused before any connection', async (_, __, address) => {
    const before = lookups.length;
    const exchange = await client.exchange(`https://${hostOf(address)}/catalog`, { method: 'GET' }, async () => 'sent');
    expect(exchange).toEqual({ ok: false, error: 'blocked_address', latencyMs: 0 });
    expect(lookups.length).toBe(before);
  });
});
