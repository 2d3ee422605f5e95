// Text from outside (a receiver's answer, an attempt's error) shown as it came, but for characters
// that change how the page reads without being seen: bidirectional controls (U+202A-U+202E,
// U+2066-U+2069, U+200E, U+200F, U+061C; a U+202E reverses what follows it, the "Trojan Source"
// trick) and other invisible ones (C0 controls but tab and line breaks, DEL, C1 controls,
// zero-width characters, the line and paragraph separators, U+FEFF) appear as their code point,
// `<U+202E>`, marked apart so that no one takes them for text the receiver sent.
//
//   <VisibleText text={attempt.response_snippet} />

// eslint-disable-next-line no-control-regex -- control characters are what this shows as code points
const INVISIBLE = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

/** `U+202E` for '\u202e'. */
export const codePointOf = (char: string): string => `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

/** The text with every invisible or bidirectional control character shown as a marked `<U+XXXX>`. */
export function VisibleText(props: { text: string }) {
  const parts: (string | ReturnType<typeof CodePoint>)[] = [];
  let last = 0;
  for (const match of props.text.matchAll(INVISIBLE)) {
    if (match.index > last) parts.push(props.text.slice(last, match.index));
    parts.push(<CodePoint char={match[0]} />);
    last = match.index + match[0].length;
  }
  if (last < props.text.length) parts.push(props.text.slice(last));
  return <>{parts}</>;
}

function CodePoint(props: { char: string }) {
  const point = codePointOf(props.char);
  return (
    <span class="code-point" title={`${point}: an invisible or direction-changing character, shown as its code point`}>
      {`<${point}>`}
    </span>
  );
}
