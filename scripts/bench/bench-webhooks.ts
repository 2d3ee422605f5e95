// `npm run bench:webhooks`: signed webhook deliveries per second to a keep-alive loopback receiver
// (the whole dispatcher path: due query, claim, signing, POST, attempt log, health update), beside
// the raw POST rate of the same HTTP client to the same receiver, interleaved in one run.
// Target: >= 2,000 deliveries/s here. Also the cost of checking each payload against the
// generated webhooks registry before signing: per payload, beside a delivery's time.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.js';
import { createService } from '../../src/service.js';
import type { SqliteStorage } from '../../src/storage/sqlite/index.js';
import { AddressGuard } from '../../src/outbound/address-guard.js';
import { deliveryBody, WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { WEBHOOKS } from '../../src/generated/public-webhooks.js';
import { OwnerNotifier } from '../../src/webhooks/notifier.js';
import { HttpDeliverySender } from '../../src/webhooks/sender.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 10_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const config = loadConfig({ CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1' });
const receiver = fork(path.join(here, 'bench-receiver.ts'), [], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
const port: number = await new Promise((resolve) => receiver.once('message', (m: { port: number }) => resolve(m.port)));
const url = `http://127.0.0.1:${port}/hooks/catalog`;
const guard = new AddressGuard(config.webhooks.allowHosts);
const concurrency = config.webhooks.perEndpointConcurrency;

const body = JSON.stringify({
  event: 'price',
  store_id: 1,
  product_ids: Array.from({ length: 50 }, (_, i) => 1000 + i),
  occurred_at: '2026-11-25T12:00:00Z',
});

/** The same client (undici keep-alive agent) posting a fixed body, `concurrency` at a time. */
async function rawPostRate(): Promise<number> {
  const sender = new HttpDeliverySender(guard, { timeoutMs: config.webhooks.timeoutMs, connectionsPerEndpoint: concurrency });
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < DELIVERIES) {
        const result = await sender.send(url, { 'Content-Type': 'application/json' }, body);
        if (result.error) throw new Error(`raw POST failed: ${result.error}`);
      }
    }),
  );
  const rate = DELIVERIES / ((performance.now() - started) / 1000);
  await sender.close();
  return rate;
}

/** The dispatcher sending DELIVERIES pending deliveries of one endpoint, from a fresh database. */
async function signedDeliveryRate(dir: string, round: number): Promise<number> {
  const service = createService({ ...config, databasePath: path.join(dir, `deliveries-${round}.db`) });
  const storage = service.storage as SqliteStorage;
  const merchant = await service.admin.createMerchant({ name: 'Webhook bench' });
  const endpoint = await service.endpoints.create(merchant.id, { url });
  const at = new Date().toISOString();
  await storage.transaction(async (tx) => {
    for (let i = 0; i < DELIVERIES; i++) {
      await tx.insertDelivery({
        endpoint_id: endpoint.id,
        event: 'price',
        store_id: null,
        product_ids: Array.from({ length: 50 }, (_, k) => 1000 + k),
        occurred_at: null,
        status: 'pending',
        attempts: 0,
        next_attempt_at: at,
        created_at: at,
      });
    }
  });
  const now = () => new Date();
  const sender = new HttpDeliverySender(guard, { timeoutMs: config.webhooks.timeoutMs, connectionsPerEndpoint: concurrency });
  const dispatcher = new WebhookDispatcher(storage, config.webhooks, {
    now,
    sender,
    notifier: new OwnerNotifier(storage, config.smtp, now),
  });
  const started = performance.now();
  let sent = 0;
  while (sent < DELIVERIES) {
    const n = await dispatcher.sendDue();
    if (n === 0) throw new Error(`stalled after ${sent} deliveries`);
    sent += n;
  }
  const rate = DELIVERIES / ((performance.now() - started) / 1000);
  const succeeded = storage.db.prepare("SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'").pluck().get();
  if (succeeded !== DELIVERIES) throw new Error(`${String(succeeded)} of ${DELIVERIES} succeeded`);
  await dispatcher.stop();
  await service.close();
  return rate;
}

/** Microseconds per payload: the registry check alone, and the whole body (check + JSON) as the dispatcher builds it. */
function payloadCheckMicros(): { check: number; body: number; unchecked: number } {
  const delivery = { event: 'price' as const, store_id: 1, product_ids: Array.from({ length: 50 }, (_, i) => 1000 + i) };
  const payload = { ...delivery, occurred_at: '2026-11-25T12:00:00Z' };
  const n = 200_000;
  const time = (f: () => unknown) => {
    for (let i = 0; i < n / 10; i++) f(); // warm-up
    const started = performance.now();
    for (let i = 0; i < n; i++) f();
    return ((performance.now() - started) * 1000) / n;
  };
  return {
    check: time(() => WEBHOOKS.price.validate(payload)),
    body: time(() => deliveryBody(delivery, payload.occurred_at)),
    unchecked: time(() => JSON.stringify({ ...delivery, occurred_at: payload.occurred_at })),
  };
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-bench-webhooks-'));
try {
  const raw: number[] = [];
  const signed: number[] = [];
  await rawPostRate(); // warm-up
  for (let round = 1; round <= ROUNDS; round++) {
    raw.push(await rawPostRate());
    signed.push(await signedDeliveryRate(dir, round));
    console.log(`round ${round}: raw POST ${raw.at(-1)!.toFixed(0)}/s, signed deliveries ${signed.at(-1)!.toFixed(0)}/s`);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log('');
  console.log(`${DELIVERIES} deliveries per round, ${concurrency} in flight (per-endpoint concurrency), keep-alive loopback receiver:`);
  console.log(`median raw POST rate          ${median(raw).toFixed(0)}/s`);
  console.log(`median signed delivery rate   ${median(signed).toFixed(0)}/s  (target >= 2000/s)`);
  console.log(`signed / raw = ${(median(signed) / median(raw)).toFixed(2)}`);
  const { check, body: built, unchecked } = payloadCheckMicros();
  const perDelivery = 1e6 / median(signed);
  console.log(
    `payload check (generated registry, 50 ids)   ${check.toFixed(2)} µs/payload = ${((check / perDelivery) * 100).toFixed(2)}% of a delivery's ${perDelivery.toFixed(0)} µs`,
  );
  console.log(
    `body built and checked (deliveryBody)        ${built.toFixed(2)} µs/payload, unchecked (JSON.stringify alone) ${unchecked.toFixed(2)} µs`,
  );
} finally {
  receiver.kill();
  fs.rmSync(dir, { recursive: true, force: true });
}
