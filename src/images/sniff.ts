// What an image's bytes are: the mirror keeps a copy only when its first bytes are one
// of the accepted image formats, whatever the supplier's Content-Type says, and `/media` serves a
// copy only under the type its bytes are. So HTML or SVG labelled `image/png` is never mirrored,
// and a copy is never served as a type it is not.

const startsWith = (bytes: Uint8Array, at: number, ascii: string) =>
  bytes.length >= at + ascii.length && [...ascii].every((char, i) => bytes[at + i] === char.charCodeAt(0));

/** AVIF: an ISO BMFF `ftyp` box whose major or a compatible brand is `avif` or `avis`. */
function isAvif(bytes: Uint8Array): boolean {
  if (!startsWith(bytes, 4, 'ftyp') || bytes.length < 16) return false;
  const size = ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
  const end = Math.min(size, bytes.length, 4096);
  // The major brand at 8, the minor version at 12, then the compatible brands.
  for (let at = 8; at + 4 <= end; at += at === 8 ? 8 : 4) {
    if (startsWith(bytes, at, 'avif') || startsWith(bytes, at, 'avis')) return true;
  }
  return false;
}

/** The image content type the bytes are (one the mirror accepts), or undefined for anything else (HTML, SVG, ...). */
export function sniffImageType(bytes: Uint8Array): string | undefined {
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (bytes.length >= 8 && [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a].every((b, i) => bytes[i] === b)) return 'image/png';
  if (startsWith(bytes, 0, 'GIF87a') || startsWith(bytes, 0, 'GIF89a')) return 'image/gif';
  if (startsWith(bytes, 0, 'RIFF') && startsWith(bytes, 8, 'WEBP')) return 'image/webp';
  if (isAvif(bytes)) return 'image/avif';
  return undefined;
}
