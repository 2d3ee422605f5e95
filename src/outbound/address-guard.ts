// SSRF guard for every outgoing request (webhook deliveries, image fetches): `https://` only, and
// only to globally routable unicast addresses. An allow-list, not a block-list: an IPv6 address
// must be global unicast (2000::/3), and no address may fall in an IANA special-purpose range
// (iana.org/assignments/iana-ipv4-special-registry, iana-ipv6-special-registry), whether or not
// the registry calls it globally reachable (anycast service addresses are never receivers).
// Addresses that embed an IPv4 address (IPv4-mapped and -translated, NAT64's well-known prefix,
// 6to4, Teredo) are judged by the IPv4 address they carry. Checked at registration and again at
// connection time, after DNS resolution, so a name that later resolves to an internal address is
// still refused; names reserved for tests and documentation (RFC 2606, 6761) are refused at both.
// Operators opt hosts in explicitly (CPS_WEBHOOK_ALLOW_HOSTS) for local development and tests.
import { isIP } from 'node:net';

/** A special-purpose block: its network as a number, its prefix length, and what it is. */
interface Block<N> {
  network: N;
  prefix: number;
  name: string;
}

const V4_BITS = 32;
const V6_BITS = 128n;

/** IPv4 special-purpose blocks (the IANA registry, plus multicast): never connected to. */
export const IPV4_SPECIAL_PURPOSE: readonly (readonly [string, string])[] = [
  ['0.0.0.0/8', '"this network" (RFC 791)'],
  ['10.0.0.0/8', 'private use (RFC 1918)'],
  ['100.64.0.0/10', 'shared address space, CGNAT (RFC 6598)'],
  ['127.0.0.0/8', 'loopback (RFC 1122)'],
  ['169.254.0.0/16', 'link-local (RFC 3927)'],
  ['172.16.0.0/12', 'private use (RFC 1918)'],
  // Holds 192.0.0.0/29 DS-Lite, .8 the dummy address, .9 PCP and .10 TURN anycast, .170/.171 NAT64 discovery.
  ['192.0.0.0/24', 'IETF protocol assignments (RFC 6890)'],
  ['192.0.2.0/24', 'documentation, TEST-NET-1 (RFC 5737)'],
  ['192.31.196.0/24', 'AS112-v4 (RFC 7535)'],
  ['192.52.193.0/24', 'AMT (RFC 7450)'],
  ['192.88.99.0/24', 'deprecated 6to4 relay anycast (RFC 7526)'],
  ['192.168.0.0/16', 'private use (RFC 1918)'],
  ['192.175.48.0/24', 'direct delegation AS112 service (RFC 7534)'],
  ['198.18.0.0/15', 'benchmarking (RFC 2544)'],
  ['198.51.100.0/24', 'documentation, TEST-NET-2 (RFC 5737)'],
  ['203.0.113.0/24', 'documentation, TEST-NET-3 (RFC 5737)'],
  ['224.0.0.0/4', 'multicast (RFC 5771)'],
  // Holds 255.255.255.255/32, the limited broadcast address.
  ['240.0.0.0/4', 'reserved (RFC 1112)'],
];

/**
 * IPv6 special-purpose blocks inside global unicast (2000::/3): never connected to. Everything
 * outside 2000::/3 is refused anyway (::, ::1, ::/96 IPv4-compatible, 64:ff9b:1::/48 local-use
 * NAT64, 100::/64 discard-only, 5f00::/16 SRv6 SIDs, fc00::/7, fec0::/10, fe80::/10, ff00::/8),
 * except the IPv4-embedding prefixes EMBEDDING_IPV4 decodes.
 */
export const IPV6_SPECIAL_PURPOSE_IN_GLOBAL_UNICAST: readonly (readonly [string, string])[] = [
  // Holds 2001:1::1-3 PCP, TURN and DNS-SD SRP anycast, 2001:2::/48 benchmarking, 2001:3::/32 AMT,
  // 2001:4:112::/48 AS112-v6, 2001:10::/28 ORCHID, 2001:20::/28 ORCHIDv2, 2001:30::/28 drone DETs.
  // Teredo (2001::/32) is in it too, and decoded first.
  ['2001::/23', 'IETF protocol assignments (RFC 2928)'],
  ['2001:db8::/32', 'documentation (RFC 3849)'],
  ['2620:4f:8000::/48', 'direct delegation AS112 service (RFC 7534)'],
  ['3fff::/20', 'documentation (RFC 9637)'],
];

const parseV4 = (text: string): number | undefined => {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255)) return undefined;
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
};

/** An IPv6 address as a 128-bit number (an IPv4 tail `::ffff:1.2.3.4` included); undefined when it is not one. */
const parseV6 = (text: string): bigint | undefined => {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (half: string): number[] | undefined => {
    if (half === '') return [];
    const out: number[] = [];
    const parts = half.split(':');
    for (const [i, part] of parts.entries()) {
      if (i === parts.length - 1 && part.includes('.')) {
        const v4 = parseV4(part);
        if (v4 === undefined) return undefined;
        out.push(v4 >>> 16, v4 & 0xffff);
      } else if (/^[0-9a-f]{1,4}$/i.test(part)) {
        out.push(parseInt(part, 16));
      } else {
        return undefined;
      }
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  return [...head, ...Array<number>(missing).fill(0), ...tail].reduce((n, g) => (n << 16n) | BigInt(g), 0n);
};

const v4Block = ([cidr, name]: readonly [string, string]): Block<number> => {
  const [network, prefix] = cidr.split('/') as [string, string];
  return { network: parseV4(network)!, prefix: Number(prefix), name };
};
const v6Block = ([cidr, name]: readonly [string, string]): Block<bigint> => {
  const [network, prefix] = cidr.split('/') as [string, string];
  return { network: parseV6(network)!, prefix: Number(prefix), name };
};

const inV4 = (address: number, { network, prefix }: Block<number>) =>
  prefix === 0 || Math.floor(address / 2 ** (V4_BITS - prefix)) === Math.floor(network / 2 ** (V4_BITS - prefix));
const inV6 = (address: bigint, { network, prefix }: Block<bigint>) =>
  address >> (V6_BITS - BigInt(prefix)) === network >> (V6_BITS - BigInt(prefix));

const V4_BLOCKS = IPV4_SPECIAL_PURPOSE.map(v4Block);
const V6_BLOCKS = IPV6_SPECIAL_PURPOSE_IN_GLOBAL_UNICAST.map(v6Block);
const GLOBAL_UNICAST = v6Block(['2000::/3', 'global unicast (RFC 4291)']);
const TEREDO = v6Block(['2001::/32', 'Teredo (RFC 4380)']);
const LOW_32 = 0xffffffffn;

/**
 * The prefixes whose addresses carry an IPv4 address, and where: such an address is as routable
 * as the IPv4 address it carries (a 6to4 address of 127.0.0.1 reaches 127.0.0.1).
 */
const EMBEDDING_IPV4: readonly { block: Block<bigint>; carried: (address: bigint) => number[] }[] = [
  { block: v6Block(['::ffff:0:0/96', 'IPv4-mapped (RFC 4291)']), carried: (a) => [Number(a & LOW_32)] },
  { block: v6Block(['::ffff:0:0:0/96', 'IPv4-translated (RFC 2765)']), carried: (a) => [Number(a & LOW_32)] },
  { block: v6Block(['64:ff9b::/96', 'NAT64 well-known prefix (RFC 6052)']), carried: (a) => [Number(a & LOW_32)] },
  { block: v6Block(['2002::/16', '6to4 (RFC 3056)']), carried: (a) => [Number((a >> 80n) & LOW_32)] },
  // The Teredo server's address, then the client's: the complement of the last 32 bits.
  { block: TEREDO, carried: (a) => [Number((a >> 64n) & LOW_32), Number(~a & LOW_32)] },
];

/** Why an IPv4 address (as a number) is refused, or null when it is globally routable unicast. */
function ipv4Problem(address: number): string | null {
  return V4_BLOCKS.find((block) => inV4(address, block))?.name ?? null;
}

/** Why an IPv6 address (as a number) is refused, or null when it is globally routable unicast. */
function ipv6Problem(address: bigint): string | null {
  for (const { block, carried } of EMBEDDING_IPV4) {
    if (!inV6(address, block)) continue;
    const refused = carried(address)
      .map(ipv4Problem)
      .find((problem) => problem !== null);
    return refused ? `${block.name} carrying ${refused}` : null;
  }
  if (!inV6(address, GLOBAL_UNICAST)) return 'not global unicast (outside 2000::/3)';
  return V6_BLOCKS.find((block) => inV6(address, block))?.name ?? null;
}

/**
 * Why an IP address must never be the target of an outgoing request, or null when it may be:
 * only globally routable unicast addresses may. Anything that is not an IP address, and any
 * address with a zone (`fe80::1%eth0`), is refused.
 */
export function addressProblem(address: string): string | null {
  const family = isIP(address);
  if (family === 4) return ipv4Problem(parseV4(address)!);
  if (family !== 6 || address.includes('%')) return 'not an IP address without a zone';
  const parsed = parseV6(address);
  return parsed === undefined ? 'not an IPv6 address' : ipv6Problem(parsed);
}

/** True when an IP address must never be the target of an outgoing request. */
export function isBlockedAddress(address: string): boolean {
  return addressProblem(address) !== null;
}

/** A URL's hostname without the brackets of an IPv6 literal: `[::1]` is `::1`. */
export function bareHost(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, '');
}

/** A DNS name as the name checks compare it: lower case, and `localhost.` (fully qualified) the same as `localhost`. */
function dnsName(hostname: string): string {
  return hostname.toLowerCase().replace(/\.$/, '');
}

/** Why a reserved name is refused at registration (the same names isReservedName refuses at connection). */
export const RESERVED_NAME_REASON =
  'must not use a name reserved for tests and documentation (RFC 2606, RFC 6761: .test, .example, .invalid, .localhost, example.com, example.net, example.org): it never resolves publicly';

export class AddressGuard {
  private readonly allowed: Set<string>;

  /** `allowHosts`: hostnames or IP addresses exempt from the guard (and allowed over http). */
  constructor(allowHosts: readonly string[] = []) {
    this.allowed = new Set(allowHosts.map((h) => bareHost(h.toLowerCase())));
  }

  isAllowedHost(hostname: string): boolean {
    return this.allowed.has(bareHost(hostname.toLowerCase()));
  }

  /** Why a receiver URL is refused at registration, or null when it is acceptable. */
  urlProblem(url: string): string | null {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return 'is not a valid URL';
    }
    if (parsed.username || parsed.password) return 'must not carry credentials';
    const host = bareHost(parsed.hostname);
    if (this.isAllowedHost(host)) {
      return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? null : 'must use https://';
    }
    if (parsed.protocol !== 'https:') return 'must use https://';
    const name = dnsName(host);
    if (name === 'localhost' || name.endsWith('.localhost')) return 'must not point at this machine';
    if (this.isReservedName(host)) return RESERVED_NAME_REASON;
    if (isIP(host) && isBlockedAddress(host))
      return 'must point at a globally routable address, not a loopback, private, link-local or other special-purpose one';
    return null;
  }

  /**
   * Names reserved for tests and documentation (RFC 2606, 6761) never resolve publicly: they are
   * refused before any DNS query, unless allowlisted.
   */
  isReservedName(hostname: string): boolean {
    const host = dnsName(hostname);
    if (this.isAllowedHost(host)) return false;
    return /(^|\.)(test|example|invalid|localhost)$/.test(host) || /(^|\.)example\.(com|net|org)$/.test(host);
  }

  /** Checked at connection time on every address DNS returned. */
  isBlockedConnection(hostname: string, address: string): boolean {
    if (this.isAllowedHost(hostname) || this.isAllowedHost(address)) return false;
    return isBlockedAddress(address);
  }

  /** An IP literal in a URL never goes through DNS, so it is checked before connecting. */
  isBlockedLiteral(url: URL): boolean {
    const host = bareHost(url.hostname);
    return isIP(host) !== 0 && this.isBlockedConnection(host, host);
  }
}
