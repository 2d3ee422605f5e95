// Liveness and readiness (openapi/operations.yaml): what /healthz and /readyz answer.
import type { components } from '../generated/operations-api.js';
import type { CatalogStorage } from '../storage/port.js';

export type Readiness = components['schemas']['Readiness'];

/** The process's lifecycle as the probes see it: set to shutting down on SIGTERM. */
export class Lifecycle {
  shuttingDown = false;
}

function check(run: () => string): string {
  try {
    return run();
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** Ready: the database answers, its schema is this version's, and the process is not shutting down. */
export function readiness(storage: CatalogStorage, lifecycle: Lifecycle): Readiness {
  const checks = {
    database: check(() => {
      storage.ping();
      return 'ok';
    }),
    schema: check(() => {
      const missing = storage.missingMigrations();
      return missing.length === 0 ? 'ok' : `migrations not applied: ${missing.join(', ')}`;
    }),
    shutdown: lifecycle.shuttingDown ? 'shutting down' : 'ok',
  };
  return { status: Object.values(checks).every((v) => v === 'ok') ? 'ready' : 'not_ready', checks };
}
