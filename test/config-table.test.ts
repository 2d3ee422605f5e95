// The configuration table of docs/configuration.md is written from the settings' declarations
// (scripts/generate/config-table.ts, `npm run generate`), and `generate --check` (part of `npm test`) fails
// when it is stale.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { CONFIG_DOC, configTable, TABLE_START, withConfigTable } from '../scripts/generate/config-table.js';
import { SETTINGS } from '../src/config/settings.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PAGE = fs.readFileSync(path.join(ROOT, CONFIG_DOC), 'utf8');

describe('the configuration table of docs/configuration.md', () => {
  it('is the one the settings make: a row per variable, in their order, with its default, bounds and meaning', () => {
    expect(withConfigTable(PAGE)).toBe(PAGE);
    const rows = configTable().split('\n').slice(2);
    expect(rows.map((row) => /^\| `(CPS_[A-Z_]+)` \|/.exec(row)?.[1])).toEqual(Object.keys(SETTINGS.shape));
    expect(rows).toContain('| `CPS_FEED_WINDOW` | `1000` | 1 to 1000 | recorded changes one `GET /v1/changes` response covers at most |');
    expect(rows).toContain('| `CPS_ADMIN_BODY_BYTES` | `1048576` (1 MiB) | 0 or more | largest admin JSON body (413 above) |');
    expect(
      rows
        .find((row) => row.startsWith('| `CPS_WORKERS` |'))
        ?.split(' | ')
        .slice(1, 3),
    ).toEqual(['`thread`', '`thread`, `inline`']);
  });

  it('needs its markers, and names the page without them', () => {
    expect(() => withConfigTable(PAGE.replace(TABLE_START, ''))).toThrow(/^docs\/configuration\.md has no <!-- config-table:start -->/);
  });

  it('generate --check fails on a page whose table is stale, naming the page and the table', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-config-doc-'));
    const stale = path.join(dir, 'configuration.md');
    fs.writeFileSync(stale, PAGE.replace('| `CPS_PORT` | `8080` |', '| `CPS_PORT` | `8081` |'));
    const run = promisify(execFile);
    const check = (page: string) =>
      run(process.execPath, ['--import', 'tsx', 'scripts/generate/generate.ts', '--check', '--config-doc', page], { cwd: ROOT }).then(
        ({ stdout }) => ({ code: 0, stdout, stderr: '' }),
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
    try {
      const failed = await check(stale);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain(
        'configuration.md: the configuration table is stale (src/config/settings.ts): run `npm run generate`',
      );
      // Written anew, the table is the committed one (which `npm run generate:check` passes).
      expect(withConfigTable(fs.readFileSync(stale, 'utf8'))).toBe(PAGE);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
