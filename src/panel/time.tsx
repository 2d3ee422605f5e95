// A moment as the panel shows it: the server writes it in UTC, readable as is without
// JavaScript ("2025-03-14 09:00:00 UTC"); assets/local-time.js rewrites it to the viewer's local
// time and how long ago (or how soon) it is, and the UTC text stays on hover (the title). The
// stylesheet keeps it on one line, so it never breaks mid-string.

/** "2025-03-14 09:00:00 UTC", or the text itself when it is not a time. */
export function utcText(at: string): string {
  const time = new Date(at);
  if (Number.isNaN(time.getTime())) return at;
  return `${time.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A timestamp (ISO 8601), or what to say when there is none. */
export function Time(props: { at: string | null | undefined; none?: string }) {
  if (!props.at) return <span class="muted">{props.none ?? '—'}</span>;
  const text = utcText(props.at);
  return (
    <time datetime={props.at} title={text} data-local="">
      {text}
    </time>
  );
}
