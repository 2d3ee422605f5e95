// Liveness and readiness (openapi/operations.yaml): what /healthz and /readyz answer.
import type { components } from '../generated/operations-api.js';
import type { CatalogStorage } from '../storage/port.js';
import type { ConnectionsReadout } from './descriptors.js';
import type { Logger } from './log.js';

export type Readiness = components['schemas']['Readiness'];

/** What readiness asks of the database: that it answers, and which migrations it lacks. */
export type DatabaseProbe = Pick<CatalogStorage, 'ping' | 'missingMigrations'>;

/** The process's lifecycle as the probes see it: set to shutting down on SIGTERM. */
export class Lifecycle {
  shuttingDown = false;
  /** The listener has stopped accepting: public API requests still arriving on open connections answer 503 (http/closing.ts). */
  closing = false;
}

/**
 * Ready: the database answers, its schema is this version's, and the process is not shutting down.
 * The probe is unauthenticated, so a failed check answers only `unavailable`; the error itself
 * goes to the log.
 */
export async function readiness(
  storage: DatabaseProbe,
  lifecycle: Lifecycle,
  log: Logger,
  connections?: ConnectionsReadout,
): Promise<Readiness> {
  const check = async (name: string, run: () => Promise<string>): Promise<string> => {
    try {
      return await run();
    } catch (error) {
      log.error({ err: error, check: name }, 'readiness check failed');
      return 'unavailable';
    }
  };
  const checks = {
    database: await check('database', async () => {
      await storage.ping();
      return 'ok';
    }),
    schema: await check('schema', async () => {
      const missing = await storage.missingMigrations();
      return missing.length === 0 ? 'ok' : `migrations not applied: ${missing.join(', ')}`;
    }),
    shutdown: lifecycle.shuttingDown ? 'shutting down' : 'ok',
  };
  const status = Object.values(checks).every((v) => v === 'ok') ? 'ready' : 'not_ready';
  return connections ? { status, checks, connections: connectionsShown(connections) } : { status, checks };
}

/** The cap as /readyz shows it: informational, never a failed check (a full process still serves what it holds). */
function connectionsShown({ limits, open }: ConnectionsReadout): NonNullable<Readiness['connections']> {
  return {
    descriptor_limit: limits.descriptorLimit,
    descriptor_reserve: limits.descriptorReserve,
    max_connections: limits.maxConnections,
    open,
  };
}
