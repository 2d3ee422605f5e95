// Reading a Prometheus text exposition (GET /metrics) in tests and scripts.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every sample line of the exposition (comments skipped). */
export function parseExposition(exposition: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of exposition.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) continue;
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the sample with this name and exactly these labels; undefined when absent. */
export function sample(exposition: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels);
  return parseExposition(exposition).find(
    (s) => s.name === name && Object.keys(s.labels).length === wanted.length && wanted.every(([k, v]) => s.labels[k] === v),
  )?.value;
}

/** The sum of the samples with this name whose labels include these. */
export function total(exposition: string, name: string, match: (labels: Record<string, string>) => boolean = () => true): number {
  return parseExposition(exposition)
    .filter((s) => s.name === name && match(s.labels))
    .reduce((sum, s) => sum + s.value, 0);
}
