// IP addresses and CIDR ranges, as settings list them (CPS_TRUSTED_PROXIES): parsed and checked once
// at start, then matched per request with node's BlockList. An IPv4 address written as IPv6
// (`::ffff:10.0.0.1`, what a dual-stack socket reports) is the IPv4 address it carries.
//
//   const proxies = new AddressRanges(['10.0.0.0/8', '2001:db8::5']);
//   proxies.has('10.1.2.3');   // true
import { BlockList, isIP } from 'node:net';

const MAPPED_IPV4 = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/** The address in its canonical family: `::ffff:1.2.3.4` is `1.2.3.4`; undefined when it is not an IP address. */
export function ipAddress(text: string): string | undefined {
  const mapped = MAPPED_IPV4.exec(text);
  const address = mapped ? mapped[1]! : text;
  return isIP(address) ? address.toLowerCase() : undefined;
}

export interface AddressRange {
  address: string;
  family: 'ipv4' | 'ipv6';
  prefix: number;
}

/** `10.0.0.0/8`, `192.0.2.7` (a /32), `2001:db8::/32`, `::1`; undefined when it is none of these. */
export function addressRange(text: string): AddressRange | undefined {
  const [head, prefixText, ...rest] = text.trim().split('/');
  if (rest.length > 0 || head === undefined) return undefined;
  const address = ipAddress(head);
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
    const ip = ipAddress(address);
    return ip !== undefined && this.list.check(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6');
  }
}
