// Secret rotation from the command line: `webhooks rotate` prints the new secret once
// and until when the old one signs, `webhooks confirm-secret` makes the new one sign now. The CLI
// runs as a child process on the project's database (a SQLite file or the test PostgreSQL
// server), beside a running service whose admin API reads the result.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { runCli } from '../support/cli.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchant: MerchantHandle;

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Command Line Outfitters');
});
afterAll(() => service?.close());

/** Runs the CLI on the service's database; never rejects on a non-zero exit. */
const cli = (args: string[], env: Record<string, string> = {}) =>
  runCli(args, { ...service.database.env, CPS_DEMO_ON_EMPTY: 'false', ...env });

const endpointArgs = (id: number) => ['--merchant', String(merchant.id), '--endpoint', String(id)];

describe('webhooks rotate and webhooks confirm-secret', () => {
  it('rotate prints the new secret once and until when the old one signs; confirm-secret makes the new one sign; a second confirm-secret fails naming why', async () => {
    const created = await adminOk(
      service,
      'POST',
      `${merchant.base}/webhook-endpoints`,
      { url: 'https://hooks.outfitters-shop.com/catalog' },
      201,
    );
    const before = Date.now();
    const rotatedRun = await cli(['webhooks', 'rotate', ...endpointArgs(created.id), '--json']);
    expect(rotatedRun.code, rotatedRun.stderr).toBe(0);
    const rotated = JSON.parse(rotatedRun.stdout);
    expect(rotated.secret).toMatch(/^whsec_[A-Za-z0-9]{48}$/);
    expect(rotated).toMatchObject({
      id: created.id,
      secret_prefix: created.secret_prefix,
      secret_rotation: { new_secret_prefix: rotated.secret.slice(0, 12) },
    });
    const until = Date.parse(rotated.secret_rotation.pending_until);
    expect(until).toBeGreaterThanOrEqual(before + 24 * 3600_000 - 1000);
    expect(until).toBeLessThanOrEqual(Date.now() + 24 * 3600_000);
    // The admin API shows the same pending rotation, never the secret.
    const shown = await service.adminApi('GET', `${merchant.base}/webhook-endpoints/${created.id}`);
    expect(shown.body.secret_rotation).toEqual(rotated.secret_rotation);
    expect(shown.text).not.toContain(rotated.secret);

    const confirmedRun = await cli(['webhooks', 'confirm-secret', ...endpointArgs(created.id), '--json']);
    expect(confirmedRun.code, confirmedRun.stderr).toBe(0);
    expect(JSON.parse(confirmedRun.stdout)).toMatchObject({
      id: created.id,
      secret_prefix: rotated.secret.slice(0, 12),
      secret_rotation: null,
    });
    expect(confirmedRun.stdout).not.toContain(rotated.secret);

    const again = await cli(['webhooks', 'confirm-secret', ...endpointArgs(created.id)]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain(`Webhook endpoint ${created.id} has no secret rotation pending`);

    const audit = await adminOk(service, 'GET', `${merchant.base}/audit-log?limit=10`);
    expect(
      audit.data
        .filter((e: { action: string }) => e.action.endsWith('_secret'))
        .map((e: { action: string; actor: string }) => [e.action, e.actor]),
    ).toEqual([
      ['endpoint.confirm_secret', 'operator'],
      ['endpoint.rotate_secret', 'operator'],
    ]);
  }, 120_000);

  it('rotate without --json says the secret is shown once and how to confirm; the grace period is CPS_WEBHOOK_SECRET_GRACE_HOURS', async () => {
    const created = await adminOk(
      service,
      'POST',
      `${merchant.base}/webhook-endpoints`,
      { url: 'https://hooks.outfitters-shop.com/other' },
      201,
    );
    const before = Date.now();
    const result = await cli(['webhooks', 'rotate', ...endpointArgs(created.id)], { CPS_WEBHOOK_SECRET_GRACE_HOURS: '2' });
    expect(result.code, result.stderr).toBe(0);
    const until = (await adminOk(service, 'GET', `${merchant.base}/webhook-endpoints/${created.id}`)).secret_rotation.pending_until;
    expect(Date.parse(until)).toBeGreaterThanOrEqual(before + 2 * 3600_000 - 1000);
    expect(Date.parse(until)).toBeLessThanOrEqual(Date.now() + 2 * 3600_000);
    expect(result.stdout).toContain(
      `The new secret is shown once: store it now. The old one signs until ${until}; run \`webhooks confirm-secret\``,
    );
  }, 120_000);
});

describe('webhooks create and update with the endpoint options', () => {
  it('create takes --standard-webhooks on and --max-per-second N; update changes them (none removes the limit); bad values fail naming the option', async () => {
    const createdRun = await cli([
      'webhooks',
      'create',
      '--merchant',
      String(merchant.id),
      '--url',
      'https://hooks.outfitters-shop.com/options',
      '--standard-webhooks',
      'on',
      '--max-per-second',
      '5',
      '--json',
    ]);
    expect(createdRun.code, createdRun.stderr).toBe(0);
    const created = JSON.parse(createdRun.stdout);
    expect(created).toMatchObject({ standard_webhooks: true, max_per_second: 5 });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9]{48}$/);

    const updatedRun = await cli([
      'webhooks',
      'update',
      ...endpointArgs(created.id),
      '--standard-webhooks',
      'off',
      '--max-per-second',
      'none',
      '--json',
    ]);
    expect(updatedRun.code, updatedRun.stderr).toBe(0);
    expect(JSON.parse(updatedRun.stdout)).toMatchObject({
      id: created.id,
      standard_webhooks: false,
      max_per_second: null,
      url: created.url,
    });
    const shown = await service.adminApi('GET', `${merchant.base}/webhook-endpoints/${created.id}`);
    expect(shown.body).toMatchObject({ standard_webhooks: false, max_per_second: null });

    // Two refused updates, independent of each other: run side by side.
    const [tooMany, notOnOff] = await Promise.all([
      cli(['webhooks', 'update', ...endpointArgs(created.id), '--max-per-second', '1001']),
      cli(['webhooks', 'update', ...endpointArgs(created.id), '--standard-webhooks', 'maybe']),
    ]);
    expect(tooMany.code).not.toBe(0);
    expect(tooMany.stderr).toContain('--max-per-second: Too big: expected number to be <=1000');
    expect(notOnOff.code).not.toBe(0);
    expect(notOnOff.stderr).toContain('--standard-webhooks takes on or off');
    expect((await service.adminApi('GET', `${merchant.base}/webhook-endpoints/${created.id}`)).body.max_per_second).toBeNull();
    // Three CLI runs one after another, as the cases above (each start loads the whole CLI: ~1.5 s of
    // CPU, 6-7 s at a load of 18 on 2 cores), with their time-out.
  }, 120_000);
});
