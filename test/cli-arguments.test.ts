// Every numeric option of the command line is checked the same way: a negative, zero, fractional,
// huge or non-numeric value (`--max-per-second -1` used to crash parseArgs with a stack trace), an
// unknown option or a missing value stops the command with exit code 2 and one message naming the
// option, never a stack trace, and nothing is written.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliResult } from './support/cli.js';

let dir: string;
let db: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-cli-args-'));
  db = path.join(dir, 'catalog.db');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI on the test's file; resolves with its exit code and output (never rejects). */
function cli(...args: string[]): Promise<CliResult> {
  return runCli([...args, '--db', db], { CPS_DEMO_ON_EMPTY: 'false' });
}

const URL = ['--url', 'https://hooks.outfitters-shop.com/catalog'];

describe('numeric options and usage errors', () => {
  it.each<{ what: string; args: string[]; message: RegExp }>([
    {
      what: '--max-per-second -1 (create)',
      args: ['webhooks', 'create', '--merchant', '1', ...URL, '--max-per-second', '-1'],
      message: /--max-per-second takes a whole number \(1 to 1000\) or none/,
    },
    {
      what: '--max-per-second -1 (update)',
      args: ['webhooks', 'update', '--merchant', '1', '--endpoint', '1', '--max-per-second', '-1'],
      message: /--max-per-second takes a whole number/,
    },
    {
      what: '--max-per-second=-1',
      args: ['webhooks', 'create', '--merchant', '1', ...URL, '--max-per-second=-1'],
      message: /--max-per-second takes a whole number/,
    },
    {
      what: '--max-per-second 2.5',
      args: ['webhooks', 'create', '--merchant', '1', ...URL, '--max-per-second', '2.5'],
      message: /--max-per-second takes a whole number/,
    },
    {
      what: '--max-per-second 0',
      args: ['webhooks', 'create', '--merchant', '1', ...URL, '--max-per-second', '0'],
      message: /--max-per-second/,
    },
    {
      what: '--max-per-second 1001',
      args: ['webhooks', 'create', '--merchant', '1', ...URL, '--max-per-second', '1001'],
      message: /--max-per-second/,
    },
    { what: '--merchant -1', args: ['keys', 'list', '--merchant', '-1'], message: /--merchant must be a whole number from 1/ },
    { what: '--merchant 0', args: ['keys', 'list', '--merchant', '0'], message: /--merchant must be a whole number from 1/ },
    {
      what: '--merchant beyond exact integers',
      args: ['keys', 'list', '--merchant', '99999999999999999999'],
      message: /--merchant must be a whole number from 1 to 9007199254740991/,
    },
    {
      what: '--endpoint -2',
      args: ['webhooks', 'rotate', '--merchant', '1', '--endpoint', '-2'],
      message: /--endpoint must be a whole number/,
    },
    {
      what: '--delivery x',
      args: ['webhooks', 'resend', '--merchant', '1', '--endpoint', '1', '--delivery', 'x'],
      message: /--delivery must be a whole number/,
    },
    { what: '--key -7', args: ['keys', 'revoke', '--merchant', '1', '--key', '-7'], message: /--key must be a whole number/ },
    { what: '--products -10', args: ['demo', '--products', '-10'], message: /--products must be a whole number/ },
    { what: '--user -1', args: ['users', 'remove', '--merchant', '1', '--user', '-1'], message: /--user must be a whole number/ },
    {
      what: '--progress-seconds -1',
      args: ['import', 'lines.ndjson', '--merchant', '1', '--progress-seconds', '-1'],
      message: /--progress-seconds must be a number of seconds above 0/,
    },
    {
      what: '--progress-seconds 1e400',
      args: ['import', 'lines.ndjson', '--merchant', '1', '--progress-seconds', '1e400'],
      message: /--progress-seconds must be a number of seconds above 0, at most 86400/,
    },
    {
      what: 'an unknown option',
      args: ['keys', 'list', '--merchant', '1', '--bogus', '1'],
      message: /Unknown option '--bogus'[\s\S]*--help/,
    },
    { what: 'a missing value', args: ['keys', 'list', '--merchant'], message: /--merchant[\s\S]*--help/ },
  ])(
    '$what: exit 2 with one message naming it, no stack trace',
    async ({ args, message }) => {
      fs.writeFileSync(path.join(dir, 'lines.ndjson'), '');
      const result = await cli(...args.map((a) => (a === 'lines.ndjson' ? path.join(dir, a) : a)));
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toMatch(message);
      expect(result.stderr).not.toMatch(/\n\s+at |TypeError|ERR_PARSE_ARGS|node:internal/);
      expect(result.stdout).toBe('');
    },
    60_000,
  );
});
