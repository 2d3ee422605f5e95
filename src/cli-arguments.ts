// The command line's arguments (cli.ts): parsed without a stack trace for any input. A value that
// starts with "-" (`--max-per-second -1`) is taken as the option's value, so the option's own check
// names what it accepts, and anything parseArgs refuses (an unknown option, a missing value) is a
// usage error: cli.ts prints it and exits with 2.
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** A command line the CLI cannot run: its message is for the user, without a stack trace. */
export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;

/** parseArgs, every usage error a UsageError. */
export function parseCommandLine<T extends ParseArgsConfig & { args: string[]; options: Options }>(
  config: T,
): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs({ ...config, args: withDashedValues(config.args, config.options) });
  } catch (error) {
    if (error instanceof Error && String((error as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS')) {
      throw new UsageError(`${error.message}\nRun with --help for the usage.`);
    }
    throw error;
  }
}

/** `--name -1` as `--name=-1` for an option that takes a value (parseArgs calls it ambiguous). */
function withDashedValues(argv: string[], options: Options): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const next = argv[i + 1];
    const option = /^--([^=]+)$/.exec(arg)?.[1];
    if (option && options[option]?.type === 'string' && next !== undefined && /^-(?!-)/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

/** The largest id or count an option takes: beyond it a number is no longer exact. */
const LARGEST = Number.MAX_SAFE_INTEGER;

/** A whole number option from 1 (ids, counts): anything else is a UsageError naming the option. */
export function positiveIntOption(value: string | undefined, name: string): number {
  if (value === undefined || !/^[1-9][0-9]*$/.test(value) || Number(value) > LARGEST) {
    throw new UsageError(`--${name} must be a whole number from 1 to ${LARGEST}${value === undefined ? '' : ` (got "${value}")`}`);
  }
  return Number(value);
}

/** A number of seconds greater than 0 and at most `max`: anything else is a UsageError naming the option. */
export function secondsOption(value: string, name: string, max: number): number {
  const seconds = /^[0-9]+(\.[0-9]+)?$/.test(value) ? Number(value) : NaN;
  if (!(seconds > 0 && seconds <= max))
    throw new UsageError(`--${name} must be a number of seconds above 0, at most ${max} (got "${value}")`);
  return seconds;
}
