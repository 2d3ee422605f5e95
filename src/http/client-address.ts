// The client's address, for what keys on it (the panel's sign-in throttle): the TCP
// peer's, unless the peer is a trusted proxy (CPS_TRUSTED_PROXIES). Then X-Forwarded-For is read
// from its right end, where each trusted proxy appended the address it was reached from, and the
// first address that is not a trusted proxy is the client: whatever a client writes in the header
// itself stays to the left of it. Without trusted proxies, or from any other peer, the header is
// ignored, so no client spoofs its way out of a throttle. The address is in its canonical spelling
// (shared/canonical-address.ts): no client escapes a count by writing its address another way.
//
//   const addressOf = clientAddressReader(config.trustedProxies);
//   await accounts.signIn(email, password, addressOf(c));
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';
import { AddressRanges } from '../shared/address-ranges.js';
import { canonicalAddress } from '../shared/canonical-address.js';

/** One X-Forwarded-For element: an address, maybe with a port (`192.0.2.1:5678`, `[2001:db8::1]:443`). */
function forwardedAddress(element: string): string | undefined {
  const text = element.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(text);
  if (bracketed) return canonicalAddress(bracketed[1]!);
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(text);
  return canonicalAddress(withPort ? withPort[1]! : text);
}

/**
 * The client's address given the peer's and the X-Forwarded-For header (all its lines, joined by
 * commas). An element that is no address ends the walk: the trusted proxy that passed it on is
 * taken for the client, never the text.
 */
export function clientAddress(peer: string | undefined, forwardedFor: string | undefined, trusted: AddressRanges): string {
  let address = peer === undefined ? undefined : (canonicalAddress(peer) ?? peer);
  if (address === undefined) return 'unknown';
  if (forwardedFor === undefined || trusted.size === 0 || !trusted.has(address)) return address;
  const hops = forwardedFor.split(',');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = forwardedAddress(hops[i]!);
    if (hop === undefined) return address;
    address = hop;
    if (!trusted.has(hop)) return hop;
  }
  // Every hop is a trusted proxy: the farthest one is the client.
  return address;
}

/** Reads the client's address of a request (clientAddress) with the deployment's trusted proxies. */
export function clientAddressReader(trustedProxies: readonly string[]): (c: Context) => string {
  const trusted = new AddressRanges(trustedProxies);
  return (c) => {
    let peer: string | undefined;
    try {
      peer = getConnInfo(c).remote.address;
    } catch {
      peer = undefined; // not served by @hono/node-server (app.fetch in a test)
    }
    return clientAddress(peer, c.req.header('x-forwarded-for'), trusted);
  };
}
