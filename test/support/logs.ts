// A pino logger whose lines are kept in memory, for tests that read what the service logs.
import { createLogger, type Logger } from '../../src/operations/log.js';
import type { LogLevel } from '../../src/config.js';

export interface LogLine {
  level: string;
  msg: string;
  time: string;
  [field: string]: unknown;
}

export class LogCapture {
  /** Every line exactly as written. */
  readonly raw: string[] = [];
  readonly logger: Logger;

  constructor(level: LogLevel = 'debug') {
    this.logger = createLogger(
      { logLevel: level },
      {
        write: (line: string) => {
          this.raw.push(line);
        },
      },
    );
  }

  get lines(): LogLine[] {
    return this.raw.map((line) => JSON.parse(line) as LogLine);
  }

  /** The lines with this message. */
  find(msg: string): LogLine[] {
    return this.lines.filter((line) => line.msg === msg);
  }

  /** All that was written, for "never contains" checks. */
  get text(): string {
    return this.raw.join('');
  }
}
