// JSON depth limit of the admin API and the NDJSON import (docs/decisions.md#errors-and-bad-input):
// a body nested deeper than the configured limit is refused from its raw text, before
// JSON.parse builds the structure and validation recurses through it. The size limit (413) is the
// body-limit middleware's.

/** The reason given, under the name `/` (or `line N` of an import), for a body nested too deep. */
export const tooDeepReason = (limit: number) => `is nested deeper than ${limit} levels of arrays and objects`;

/**
 * True when the JSON text opens more than `limit` arrays and objects inside one another. One pass
 * over the characters, skipping strings; nothing is parsed or allocated. Malformed text is left
 * to the parser to reject.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash escapes the next character, a quote included
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if ((c === 0x5d || c === 0x7d) && depth > 0) {
      depth--;
    }
  }
  return false;
}
