// Runs before each test file of the postgres project: at the end of the file, one line lists the
// tests skipped because pglite (no server binaries) has only one connection.
import { afterAll } from 'vitest';
import { pgliteSkips } from './engine.js';

afterAll(() => {
  const skipped = pgliteSkips();
  if (skipped.length > 0) {
    console.warn(
      `[pglite] ${skipped.length} test(s) skipped, they need several PostgreSQL connections: ${skipped.map((name) => `"${name}"`).join(', ')}`,
    );
  }
});
