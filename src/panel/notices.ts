// The notice a page shows after a redirect (`?done=…`), looked up in the page's own table only:
// `?done=constructor` or `?done=__proto__` finds nothing, never a property of Object.
export function noticeFor(table: Readonly<Record<string, string>>, done: string | undefined): string | undefined {
  return done !== undefined && Object.hasOwn(table, done) ? table[done] : undefined;
}
