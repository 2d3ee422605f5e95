// IP addresses and CIDR ranges, as settings list them (CPS_TRUSTED_PROXIES): parsed and checked once
// at start, then matched per request with node's BlockList. Addresses are read in their canonical
// spelling (canonical-address.ts): `::ffff:10.0.0.1`, what a dual-stack socket reports, is `10.0.0.1`.
//
//   const proxies = new AddressRanges(['10.0.0.0/8', '2001:db8::5']);
//   proxies.has('10.1.2.3');   // true
import { BlockList, isIP } from 'node:net';
import { canonicalAddress } from './canonical-address.js';

export interface AddressRange {
  address: string;
  family: 'ipv4' | 'ipv6';
  prefix: number;
}

/** `10.0.0.0/8`, `192.0.2.7` (a /32), `2001:db8::/32`, `::1`; undefined when it is none of these. */
export function addressRange(text: string): AddressRange | undefined {
  const [head, prefixText, ...rest] = text.trim().split('/');
  if (rest.length > 0 || head === undefined) return undefined;
  const address = canonicalAddress(head);
  if (!address) return undefined;
  const family = isIP(address) === 4 ? 'ipv4' : 'ipv6';
  const bits = family === 'ipv4' ? 32 : 128;
  if (prefixText === undefined) return { address, family, prefix: bits };
  if (!/^[0-9]{1,3}$/.test(prefixText) || Number(prefixText) > bits) return undefined;
  return { address, family, prefix: Number(prefixText) };
}

export class AddressRanges {
  private readonly list = new BlockList();
  readonly size: number;

  /** Throws naming the first entry that is not an address or a range. */
  constructor(entries: readonly string[]) {
    for (const entry of entries) {
      const range = addressRange(entry);
      if (!range) throw new Error(`"${entry}" is not an IP address or a CIDR range`);
      this.list.addSubnet(range.address, range.prefix, range.family);
    }
    this.size = entries.length;
  }

  has(address: string): boolean {
    const ip = canonicalAddress(address);
    return ip !== undefined && this.list.check(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6');
  }
}
