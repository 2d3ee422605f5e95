// `npm run pg:local`: a local PostgreSQL from the binaries installed on this machine, to try the
// service on PostgreSQL (docs/operating.md#scaling-out-postgresql). The cluster lives in ./data/postgres (or --dir);
// it is initialised on first use, started on --port (default: a free one) on 127.0.0.1 with trust
// authentication, and keeps running after this command ends.
//   npm run pg:local [-- --dir <folder>] [-- --port <n>]   start it (or show the one running)
//   npm run pg:local -- stop [--dir <folder>]              stop it
import path from 'node:path';
import { parseArgs } from 'node:util';
import { findPostgresBinaries, runningServer, startPostgresServer } from './postgres-server.js';

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { dir: { type: 'string', default: path.join('data', 'postgres') }, port: { type: 'string' } },
  });
  const dir = path.resolve(values.dir);
  const command = positionals[0] ?? 'start';
  const bindir = findPostgresBinaries();
  if (!bindir) {
    throw new Error(
      'No PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin, pg_config --bindir and PATH). ' +
        'Install the server package (Debian/Ubuntu: apt-get install postgresql).',
    );
  }
  const running = runningServer(dir, bindir);
  if (command === 'stop') {
    if (!running) {
      console.log(`No PostgreSQL is running in ${dir}.`);
      return;
    }
    await running.stop('fast');
    console.log(`Stopped the PostgreSQL in ${dir} (its data stays there; start it again with npm run pg:local).`);
    return;
  }
  if (command !== 'start') throw new Error(`Unknown command "${command}": use start (the default) or stop`);
  const server =
    running ??
    (await startPostgresServer({
      bindir,
      dir,
      port: values.port === undefined ? undefined : Number(values.port),
      durable: true,
    }));
  const relative = path.relative(process.cwd(), dir) || '.';
  console.log(`${running ? 'Already running' : 'Started'}: PostgreSQL from ${bindir} in ${relative}, on 127.0.0.1:${server.port}.

Use it for every command of the service (serve, worker, import, keys, ...):
  export CPS_DATABASE_URL=${server.url}

Stop it with:
  npm run pg:local -- stop${values.dir === path.join('data', 'postgres') ? '' : ` --dir ${relative}`}`);
}

main().catch((error: Error) => {
  console.error(error.message);
  process.exit(1);
});
