// The attacking clients of `npm run bench:exhaust`, on bare sockets so that a thousand of them cost
// this process next to nothing: each sends one GET, reads the status line of its answer, then reads
// nothing more (a stalled export, a non-reading stream) or a few KB a second (a slow-trickle export).
// A refused attempt (429, 503, a reset) is sent again after its `Retry-After` (1 s without one, or
// always 1 s with --ignore-retry-after) on a new connection
// for as long as the attack lasts, as a persistent client would; each is counted.
import net from 'node:net';

/** What one attempt got: the status of its answer, or `reset` when the connection ended before one. */
export type Answer = 200 | 429 | 503 | 'other' | 'reset';
/** What became of an answered 200 by the end of the attack: still held by the server, or ended by it. */
export type Fate = 'held' | 'closed' | 'reset';

export interface AttemptCounts {
  200: number;
  429: number;
  503: number;
  other: number;
  reset: number;
  /** Sent, no answer yet when the attack ended (the server never took the connection, or is slow). */
  unanswered: number;
}

interface Connection {
  answer: Promise<Answer>;
  /** The answer's `Retry-After`, in seconds, when it had one. */
  retryAfterSeconds(): number | undefined;
  /** Reads what is left for `ms`: whether the server still held it, or had closed or reset it. */
  fate(ms: number): Promise<Fate>;
  destroy(): void;
}

/** One GET on a bare socket; after the answer's first bytes it reads `bytesPerSecond` (0: nothing more). */
function connect(base: string, pathAndQuery: string, headers: Record<string, string>, bytesPerSecond: number): Connection {
  const { hostname, port } = new URL(base);
  const socket = net.connect(Number(port), hostname);
  let settleAnswer: (answer: Answer) => void = () => {};
  const answer = new Promise<Answer>((resolve) => {
    settleAnswer = resolve;
  });
  let ended: Exclude<Fate, 'held'> | undefined;
  let head = '';
  let retryAfter: number | undefined;
  let taken = 0;
  const started = performance.now();
  const onData = (chunk: Buffer) => {
    taken += chunk.length;
    if (head.length < 12) {
      head += chunk.toString('latin1', 0, 12);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]);
      // The headers come in the answer's first bytes.
      const seconds = /\r\nretry-after: *(\d+)/i.exec(chunk.toString('latin1', 0, 2048))?.[1];
      if (seconds !== undefined) retryAfter = Number(seconds);
      if (status) settleAnswer(status === 200 || status === 429 || status === 503 ? status : 'other');
    }
    if (bytesPerSecond === 0) return void socket.pause();
    // Ahead of the pace: wait until the bytes taken are due.
    const aheadMs = (taken / bytesPerSecond) * 1000 - (performance.now() - started);
    if (aheadMs > 0) {
      socket.pause();
      setTimeout(() => socket.resume(), aheadMs).unref();
    }
  };
  socket.on('data', onData);
  socket.on('error', () => {
    ended = 'reset';
    settleAnswer('reset');
  });
  socket.on('end', () => {
    ended ??= 'closed';
    settleAnswer('reset');
  });
  const lines = Object.entries({ Host: `${hostname}:${port}`, ...headers }).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.write(`GET ${pathAndQuery} HTTP/1.1\r\n${lines.join('')}\r\n`);
  return {
    answer,
    retryAfterSeconds: () => retryAfter,
    async fate(ms) {
      if (ended) return ended;
      // A paused socket learns of a close or a reset only by reading: drain it for a while.
      socket.off('data', onData);
      socket.on('data', () => {});
      socket.resume();
      await new Promise((resolve) => setTimeout(resolve, ms));
      return ended ?? 'held';
    },
    destroy: () => socket.destroy(),
  };
}

export interface Attack {
  /** Waits until every client has its first answer (or `ms` passed): the burst of opens is over. */
  opened(ms: number): Promise<void>;
  /** Ends the attack: the counts of every attempt, what became of the 200s, every connection closed. */
  stop(): Promise<{ attempts: AttemptCounts; fates: Record<Fate, number> }>;
}

export interface AttackPlan {
  base: string;
  keys: string[];
  perKey: number;
  pathAndQuery: string;
  headers: Record<string, string>;
  bytesPerSecond: number;
  /** Retry a refusal after its `Retry-After` (a client as the docs ask), or always after 1 s. */
  honourRetryAfter: boolean;
}

/** `keys.length` × `perKey` clients at once, each retrying a refusal after its Retry-After (or 1 s) until stopped. */
export function startAttack({ base, keys, perKey, pathAndQuery, headers, bytesPerSecond, honourRetryAfter }: AttackPlan): Attack {
  const attempts: AttemptCounts = { 200: 0, 429: 0, 503: 0, other: 0, reset: 0, unanswered: 0 };
  const held: Connection[] = [];
  const open = new Set<Connection>();
  let running = true;
  const client = async (key: string) => {
    while (running) {
      const connection = connect(base, pathAndQuery, { ...headers, Authorization: `Bearer ${key}` }, bytesPerSecond);
      open.add(connection);
      const answer = await Promise.race([connection.answer, stopped]);
      if (answer === undefined) return void attempts.unanswered++;
      attempts[answer]++;
      if (answer === 200) return void held.push(connection);
      const waitMs = (honourRetryAfter ? (connection.retryAfterSeconds() ?? 1) : 1) * 1000;
      connection.destroy();
      open.delete(connection);
      await Promise.race([new Promise((resolve) => setTimeout(resolve, waitMs)), stopped]);
    }
  };
  let stop: (value: undefined) => void = () => {};
  const stopped = new Promise<undefined>((resolve) => {
    stop = resolve;
  });
  const clients = keys.flatMap((key) => Array.from({ length: perKey }, () => client(key)));
  return {
    async opened(ms) {
      const deadline = performance.now() + ms;
      while (
        performance.now() < deadline &&
        attempts[200] + attempts[429] + attempts[503] + attempts.other + attempts.reset < clients.length
      )
        await new Promise((resolve) => setTimeout(resolve, 50));
    },
    async stop() {
      running = false;
      stop(undefined);
      await Promise.all(clients);
      const fates: Record<Fate, number> = { held: 0, closed: 0, reset: 0 };
      for (const fate of await Promise.all(held.map((c) => c.fate(1500)))) fates[fate]++;
      for (const connection of open) connection.destroy();
      return { attempts, fates };
    },
  };
}
