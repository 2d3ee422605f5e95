// Workflows as contracts: the Arazzo descriptions under arazzo/ run by
// `redocly respect` against the real server on 127.0.0.1. Respect checks every step's success
// criteria and every response against the documents (status, content type, schema); a workflow
// that fails fails this test, with respect's report as the message.
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook, type WebhookPayload } from '../src/client/webhooks.js';
import { loadConfig } from '../src/config.js';
import { adminOk, createMerchant, importNdjson, type MerchantHandle } from './support/admin-http.js';
import { ADMIN_TOKEN, startTestService, type TestService } from './support/service.js';

const redocly = path.join('node_modules', '.bin', 'redocly');

interface RespectRun {
  passed: boolean;
  /** respect's console report, for the failure message. */
  report: string;
}

/** `redocly respect <file>` against the test server: every source description's server is the test server. */
async function respect(service: TestService, file: string, inputs: Record<string, unknown>): Promise<RespectRun> {
  const servers = JSON.stringify({ catalog: service.url, admin: service.url });
  try {
    const { stdout } = await promisify(execFile)(redocly, ['respect', file, '--server', servers, '--input', JSON.stringify(inputs)], {
      env: { ...process.env, NO_COLOR: '1', REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    });
    return { passed: true, report: stdout };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string };
    return { passed: false, report: `${failed.stdout ?? ''}\n${failed.stderr ?? ''}` };
  }
}

/** A catalog for the feed workflow: store `de`, a customer group and three products, over the admin API. */
async function threeProductStore(service: TestService, name: string): Promise<MerchantHandle> {
  const merchant = await createMerchant(service, name);
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'Deutschland', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'POST', `${merchant.base}/customer-groups`, { name: 'retail' }, 201);
  const product = (ref: string, title: string) => ({
    op: 'upsert_product',
    product: { ref, content: { de: { title, description: null } }, own_stock: { quantity: 2, cost: '20.00', currency: 'EUR' } },
  });
  const imported = await importNdjson(service, merchant.id, [
    product('BP-40', 'Wanderrucksack 40 l'),
    product('TENT-2', 'Zelt für zwei'),
    product('LAMP-1', 'Stirnlampe'),
  ]);
  expect(imported.status, imported.text).toBe(200);
  return merchant;
}

/**
 * The integrator's receiver: verifies each delivery with the endpoint's secrets (as an integrator
 * installs them from the create and rotate responses: during a rotation, the old and the new one)
 * using the receiver kit, answers 204 to authentic deliveries and 400 to the others, and notes
 * which secret signed each.
 */
async function startVerifyingReceiver(secretsOf: () => Promise<string[]>) {
  const verified: { secret: string; payload: WebhookPayload }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    // The handler is async; an error in it surfaces as an unhandled rejection, failing the run.
    req.on(
      'end',
      () =>
        void (async () => {
          const secrets = await secretsOf();
          const rawBody = Buffer.concat(chunks);
          try {
            const payload = verifyWebhook({ secret: secrets, headers: req.headers, rawBody });
            const secret = secrets.find((one) => {
              try {
                return verifyWebhook({ secret: one, headers: req.headers, rawBody }) !== undefined;
              } catch {
                return false;
              }
            })!;
            verified.push({ secret, payload });
            res.writeHead(204).end();
          } catch {
            res.writeHead(400).end();
          }
        })(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/catalog`,
    verified,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let service: TestService;
beforeAll(async () => {
  // Receivers on 127.0.0.1 are allowed (CPS_WEBHOOK_ALLOW_HOSTS), and the dispatcher runs, as in `serve`.
  service = await startTestService({ config: { webhooks: { ...loadConfig({}).webhooks, allowHosts: ['127.0.0.1'] } } });
  service.service.dispatcher.start();
});
afterAll(() => service.close());

describe('the Arazzo workflows (arazzo/), run by redocly respect against the server', () => {
  it('lints them with redocly lint', async () => {
    const files = fs
      .readdirSync('arazzo')
      .filter((f) => f.endsWith('.arazzo.yaml'))
      .map((f) => path.join('arazzo', f));
    expect(files.length).toBeGreaterThanOrEqual(4);
    await expect(promisify(execFile)(redocly, ['lint', ...files])).resolves.toBeDefined();
  });

  it('full sync, then follow the feed: pages by after_id, polls, fetches by ids, resumes from the cursor', async () => {
    const merchant = await threeProductStore(service, 'Feed Outfitters');
    const run = await respect(service, 'arazzo/full-sync.arazzo.yaml', {
      api_key: merchant.key,
      admin_token: ADMIN_TOKEN,
      merchant_id: merchant.id,
      store: 'de',
      changed_ref: 'BP-40',
    });
    expect(run.passed, run.report).toBe(true);
  });

  it('snapshot, then follow the live feed: exports the store, a long-poll finds nothing after its cursor, 304 on its ETag, then a long-poll answers exactly the change made after it', async () => {
    const merchant = await threeProductStore(service, 'Snapshot Outfitters');
    const run = await respect(service, 'arazzo/snapshot-then-feed.arazzo.yaml', {
      api_key: merchant.key,
      admin_token: ADMIN_TOKEN,
      merchant_id: merchant.id,
      store: 'de',
      changed_ref: 'LAMP-1',
    });
    expect(run.passed, run.report).toBe(true);
  });

  it('register an endpoint, receive a delivery, rotate the secret, confirm it: the receiver verifies every delivery', async () => {
    const merchant = await createMerchant(service, 'Hook Outfitters');
    const installedSecrets = async () => {
      const [endpoint] = await service.storage.listWebhookEndpoints(merchant.id);
      return [endpoint!.secret, ...(endpoint!.pending_secret ? [endpoint!.pending_secret] : [])];
    };
    const receiver = await startVerifyingReceiver(installedSecrets);
    try {
      const run = await respect(service, 'arazzo/webhook-endpoint.arazzo.yaml', {
        admin_token: ADMIN_TOKEN,
        merchant_id: merchant.id,
        receiver_url: receiver.url,
      });
      expect(run.passed, run.report).toBe(true);
      // Three authentic deliveries: the one after the rotation still signed with the old secret
      // (the grace period), the one after the confirmation with the new secret.
      expect(receiver.verified).toHaveLength(3);
      const [before, during, after] = receiver.verified.map((v) => v.secret);
      expect(during).toBe(before);
      expect(after).not.toBe(before);
      expect(after).toBe((await installedSecrets())[0]);
      expect(receiver.verified.map((v) => v.payload.event)).toEqual(['content', 'content', 'content']);
    } finally {
      await receiver.close();
    }
  });

  it('onboard a merchant: merchant, store, customer group, key and import; the key reads the catalog', async () => {
    const run = await respect(service, 'arazzo/onboard-merchant.arazzo.yaml', {
      admin_token: ADMIN_TOKEN,
      merchant_name: 'Onboarded Outfitters',
    });
    expect(run.passed, run.report).toBe(true);
    const merchants = await adminOk(service, 'GET', '/admin/v1/merchants');
    expect(merchants.data.map((m: { name: string }) => m.name)).toContain('Onboarded Outfitters');
  });
});
