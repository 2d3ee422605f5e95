// SSRF guard for every outgoing request (webhook deliveries, image fetches): `https://` only, and
// never to loopback, private, link-local, unique-local, CGNAT, multicast, unspecified or
// IPv4-mapped addresses of those. Checked at registration and again at connection time, after DNS
// resolution, so a name that later resolves to an internal address is still refused. Operators opt
// hosts in explicitly (CPS_WEBHOOK_ALLOW_HOSTS) for local development and tests.
import { BlockList, isIP } from 'node:net';

const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16],
  ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [
  // ::/96 holds ::, ::1 and the deprecated IPv4-compatible ::a.b.c.d.
  ['::', 96], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96], ['2001:db8::', 32],
] as const) blocked.addSubnet(network, prefix, 'ipv6');

/** True when an IP address must never be the target of an outgoing request. */
export function isBlockedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family !== 6) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return isBlockedAddress(mapped[1]!);
  return blocked.check(address, 'ipv6');
}

/** A URL's hostname without the brackets of an IPv6 literal: `[::1]` is `::1`. */
export function bareHost(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, '');
}

/** A DNS name as the name checks compare it: lower case, and `localhost.` (fully qualified) the same as `localhost`. */
function dnsName(hostname: string): string {
  return hostname.toLowerCase().replace(/\.$/, '');
}

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
    if (isIP(host) && isBlockedAddress(host)) return 'must not point at a loopback, private or link-local address';
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
