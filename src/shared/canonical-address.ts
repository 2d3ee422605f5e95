// One spelling per IP address, so that what counts by address (the panel's sign-in throttle) counts
// every spelling of it together: RFC 5952's for IPv6 (lower case, no leading zeros, the first longest
// run of zero groups shortened to `::`), and an IPv4 address written as IPv6 (`::ffff:198.51.100.43`,
// `::ffff:c633:642b`, what a dual-stack socket reports) is the IPv4 address it carries.
//
//   canonicalAddress('2001:0DB8:0:0:0:0:0:00a2');  // '2001:db8::a2'
//   canonicalAddress('::ffff:198.51.100.43');      // '198.51.100.43'
import { isIP } from 'node:net';

const MAPPED_IPV4 = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/;

/** The address's canonical text; undefined when the text is not an IP address. */
export function canonicalAddress(text: string): string | undefined {
  const family = isIP(text);
  if (family === 4) return text;
  if (family !== 6) return undefined;
  let serialized: string;
  try {
    // The URL standard serializes an IPv6 host as RFC 5952 does.
    serialized = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return text.toLowerCase(); // a zone (`fe80::1%eth0`) the URL parser refuses: no other spelling to fold
  }
  const mapped = MAPPED_IPV4.exec(serialized);
  if (!mapped) return serialized;
  const high = Number.parseInt(mapped[1]!, 16);
  const low = Number.parseInt(mapped[2]!, 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}
