// A fault hook, preloaded into a `serve` child (`node --import tsx --import ./test/faults/stall-answers.ts`):
// the answer to a request whose Idempotency-Key starts with `stall-` is never sent. Everything before
// the answer (the write, its commit, the answer kept with it) runs as always, so a test can kill the
// process between a write's commit and its answer (test/faults/idempotency-crash.test.ts).
import http from 'node:http';

const response = http.ServerResponse.prototype;
const stalled = (res: http.ServerResponse) => {
  const key = res.req?.headers['idempotency-key'];
  return typeof key === 'string' && key.startsWith('stall-');
};
for (const method of ['writeHead', 'write', 'end'] as const) {
  const original = Reflect.get(response, method) as (...args: unknown[]) => unknown;
  (response as unknown as Record<string, unknown>)[method] = function (this: http.ServerResponse, ...args: unknown[]) {
    if (stalled(this)) return method === 'write' ? true : this;
    return original.apply(this, args);
  };
}
