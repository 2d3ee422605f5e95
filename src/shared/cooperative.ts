// Cooperative scheduling for long work on the event loop: a merchant-wide write (re-pricing every
// product, an import, publishing a whole store) calls `yieldToOthers()` between its bounded steps;
// once it has held the loop for a slice, it lets the requests and timers waiting meanwhile run.

let sliceStartedAt = performance.now();
let sliceMs = 5;

/** How long work may hold the event loop before it yields (default 5 ms). */
export function setYieldSlice(ms: number): void {
  sliceMs = ms;
}

/** Resolves at once within the current slice; after it, on the next turn of the event loop. */
export async function yieldToOthers(): Promise<void> {
  const now = performance.now();
  if (now - sliceStartedAt < sliceMs) return;
  await new Promise<void>((resolve) => setImmediate(resolve));
  sliceStartedAt = performance.now();
}
