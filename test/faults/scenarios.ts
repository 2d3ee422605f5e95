// The fault scenarios ("Fault and load tests"): kill -9 of `serve` during a bulk NDJSON
// import, during an exchange-rate re-pricing, and during a delivery burst; after each restart the
// full recompute agrees with what is stored and the receiver saw every change at least once. And
// SIGTERM during a delivery burst: the graceful shutdown loses nothing and sends nothing twice.
// Each scenario throws, saying what broke, when a check fails, and returns what it observed.
// Each runs on either engine: an SQLite file by default, or the PostgreSQL database it is given.
// Quick sizes run in `npm test` (test/faults/*.test.ts), larger ones in `npm run fault`.
import type { ConsistencyReport } from '../support/verify.js';
import { FaultWorld, catalogProduct, ndjson, sleep, until, type DatabaseProbe, type FaultDatabase, type ReceiverCheck } from './harness.js';

export interface ScenarioOptions {
  /** The database the service runs on (default: an SQLite file of the scenario's own). */
  database?: FaultDatabase;
  products: number;
  /** CPS_PUBLISH_CHUNK: products per transaction of an import, per bounded step of a re-pricing. */
  publishChunk: number;
  log?: (line: string) => void;
}

/** Settles a request that a kill is expected to interrupt, without an unhandled rejection. */
function track(request: Promise<Response>) {
  const state: { settled: boolean; status?: number; error?: unknown } = { settled: false };
  const done = request
    .then(
      async (response) => {
        state.status = response.status;
        await response.text();
      },
      (error: unknown) => {
        state.error = error;
      },
    )
    .finally(() => {
      state.settled = true;
    });
  return { state, done };
}

export interface ImportFaultReport {
  lines: number;
  chunk: number;
  /** Lines of the import applied when the service was killed: whole chunks, from the first. */
  linesAppliedAtKill: number;
  chunksAppliedAtKill: number;
  /** How long after the restart the import's run had ended (resumed by the restarted service). */
  resumedWithinMs: number;
  afterRestart: ConsistencyReport;
  /** Changes the same import recorded when it was sent again after it had been completed. */
  changesOfResend: number;
  afterResend: ConsistencyReport;
  receiver: ReceiverCheck;
}

/**
 * kill -9 while a bulk import (one request, staged with a publish run that applies it in chunks of
 * one transaction each: docs/architecture.md#big-writes-do-not-stall-reads) is being applied. At the kill exactly a prefix of whole chunks is
 * applied and consistent, the other chunks still staged with the run; the restarted service resumes
 * the run from its next chunk once its dead driver's hold has run out (CPS_PUBLISH_RUN_LEASE_MS,
 * short here) and completes the import, every change delivered. Sending the same import again (a
 * client that never got its answer) then applies it again and records no change.
 */
export async function killDuringImport(options: ScenarioOptions): Promise<ImportFaultReport> {
  const log = options.log ?? (() => {});
  const world = await FaultWorld.create({ database: options.database, publishChunk: options.publishChunk, log });
  try {
    await world.start();
    await world.setupMerchant();
    const half = Math.floor(options.products / 2);
    const deletable = Math.floor(options.products / 20);

    // Before: half the products (v1) and some that the big import deletes.
    const existing = [
      ...Array.from({ length: half }, (_, i) => catalogProduct(i, 1)),
      ...Array.from({ length: deletable }, (_, j) => ({
        op: 'upsert_product',
        product: { ...catalogProduct(100_000 + j, 1).product, ref: `D-${j}` },
      })),
    ];
    await world.admin('POST', `${world.merchantPath}/imports`, ndjson(existing), 'application/x-ndjson');
    log(`  imported ${existing.length} products (v1) before the fault`);

    // The big import: every product in a new version (updating half, creating half), and a delete
    // every 20 lines. On a busy machine it may complete before this process gets to probe it: then
    // it is sent again in the next version, and killed sooner.
    let lines: ImportLine[] = [];
    let text = '';
    const probe = await world.open();
    try {
      const lastChange = () => probe.value('SELECT coalesce(max(id), 0) FROM changes');
      for (let attempt = 0; ; attempt++) {
        if (attempt === 3) throw new Error(`every import (${lines.length} lines) finished before the kill: make it larger`);
        ({ lines, text } = await bigImport(world, options.products, deletable, 2 + attempt));
        const before = await lastChange();
        const request = track(world.adminRequest('POST', `${world.merchantPath}/imports`, text, 'application/x-ndjson'));
        const sent = Date.now();
        // Kill about a third of the way in (each applied line records at least one change per
        // store), while the next chunk's transaction is open.
        const chunks = Math.ceil(lines.length / options.publishChunk);
        const target = before + 3 * options.publishChunk * (attempt === 0 ? Math.max(1, Math.floor(chunks / 3)) : 1);
        while (!request.state.settled) {
          if (Date.now() - sent > 120_000) throw new Error('the import never committed a chunk');
          if ((await lastChange()) >= target && (await probe.writeTransactionOpen())) break;
          await sleep(2);
        }
        if (request.state.settled) {
          log(`  the import of version ${2 + attempt} completed before the kill; sending the next version`);
          continue;
        }
        await world.crash();
        await request.done;
        if (request.state.status !== undefined)
          throw new Error(`the import answered ${request.state.status} although the service was killed`);
        // The killed process's open transaction ends (rolled back, or committed had its COMMIT been
        // sent): from then on nothing changes until the restart.
        await until(
          async () => !(await probe.writeTransactionOpen()),
          30_000,
          () => 'a write transaction of the killed service stayed open',
        );
        break;
      }
    } finally {
      await probe.close();
    }

    // What the kill left, read before the restart: the restarted service resumes the import at once.
    const applied = await appliedLines(world, lines);
    const prefix = applied.indexOf(false) === -1 ? applied.length : applied.indexOf(false);
    if (applied.slice(prefix).some(Boolean)) {
      throw new Error(`applied lines are not a prefix: first unapplied line ${prefix + 1}, a later line is applied`);
    }
    if (prefix === 0 || prefix === lines.length)
      throw new Error(`the kill did not land inside the import (${prefix} of ${lines.length} lines applied)`);
    if (prefix % options.publishChunk !== 0) {
      throw new Error(`${prefix} lines applied: not whole chunks of ${options.publishChunk} (a chunk was half applied)`);
    }
    const staged = await importState(world);
    const chunksLeft = Math.ceil((lines.length - prefix) / options.publishChunk);
    if (staged.job?.state !== 'running' || staged.job.products_applied !== prefix || staged.runs !== 1 || staged.chunks !== chunksLeft) {
      throw new Error(
        `the kill should leave the job running at line ${prefix}, its run and ${chunksLeft} chunks staged: ${JSON.stringify(staged)}`,
      );
    }
    log(
      `  at the kill: the first ${prefix} of ${lines.length} lines are applied (${prefix / options.publishChunk} whole chunks of ${options.publishChunk}), none after them; ` +
        `the other ${chunksLeft} chunks staged with the import's run`,
    );
    await world.verify('at the kill');

    // The restarted service resumes the import's run from its next chunk and completes it. Until
    // the run has ended it records changes, a chunk per transaction: "drained" means after it.
    const restarted = Date.now();
    await world.restart();
    await until(
      async () => (await importState(world)).runs === 0,
      120_000,
      () => 'the interrupted import was never resumed to its end',
    );
    const resumedWithinMs = Date.now() - restarted;
    const resumed = await importState(world);
    if (resumed.job?.state !== 'succeeded' || resumed.job.products_applied !== lines.length || resumed.chunks !== 0) {
      throw new Error(`the resumed import should have succeeded with all ${lines.length} lines applied: ${JSON.stringify(resumed)}`);
    }
    const unappliedAfterRestart = (await appliedLines(world, lines)).filter((a) => !a).length;
    if (unappliedAfterRestart > 0)
      throw new Error(`${unappliedAfterRestart} lines unapplied after the restarted service completed the import`);
    log(`  the restarted service resumed the import and completed it within ${resumedWithinMs} ms: all ${lines.length} lines applied`);
    const afterRestart = await world.verify('after the restart (deliveries under way)');
    await world.drained();
    await world.verify('after the deliveries drained');
    await world.receiverSawEveryChange();

    // Re-sending the same import applies it again and changes nothing.
    const lastBefore = await world.read((db) => db.value('SELECT coalesce(max(id), 0) FROM changes'));
    const result = await world.admin('POST', `${world.merchantPath}/imports`, text, 'application/x-ndjson');
    if (result.lines !== lines.length) throw new Error(`re-sent import reported ${result.lines} lines, sent ${lines.length}`);
    const unapplied = (await appliedLines(world, lines)).filter((a) => !a).length;
    if (unapplied > 0) throw new Error(`${unapplied} lines unapplied after re-sending the import`);
    const changesOfResend = await world.read((db) => db.value('SELECT count(*) FROM changes WHERE id > ?', [lastBefore]));
    log(`  re-sent the import: all ${lines.length} lines applied, ${changesOfResend} changes recorded`);
    const afterResend = await world.verify('after re-sending the import');
    await world.drained();
    await world.verify('after the deliveries drained');
    const receiver = await world.receiverSawEveryChange();
    return {
      lines: lines.length,
      chunk: options.publishChunk,
      linesAppliedAtKill: prefix,
      chunksAppliedAtKill: prefix / options.publishChunk,
      resumedWithinMs,
      afterRestart,
      changesOfResend,
      afterResend,
      receiver,
    };
  } finally {
    await world.close();
  }
}

/** The big import's job (the newest), the publish runs left and the import chunks still staged. */
async function importState(world: FaultWorld) {
  return world.read(async (db) => ({
    job: (
      await db.rows<{ id: number; state: string; products_applied: number }>(
        'SELECT id, state, products_applied FROM import_jobs WHERE merchant_id = ? ORDER BY id DESC LIMIT 1',
        [world.merchantId],
      )
    )[0],
    runs: await db.value('SELECT count(*) FROM publish_runs'),
    chunks: await db.value('SELECT count(*) FROM import_job_chunks'),
  }));
}

type ImportLine = { op: 'upsert_product'; ref: string; title: string } | { op: 'delete_product'; ref: string };

/** Every product in `version`, with a delete of one of the `D-` products still there every 20 lines. */
async function bigImport(
  world: FaultWorld,
  products: number,
  deletable: number,
  version: number,
): Promise<{ lines: ImportLine[]; text: string }> {
  const remaining = new Set(
    (
      await world.read((db) =>
        db.rows<{ ref: string }>("SELECT ref FROM products WHERE merchant_id = ? AND ref LIKE 'D-%'", [world.merchantId]),
      )
    ).map((r) => r.ref),
  );
  const lines: ImportLine[] = [];
  const body: unknown[] = [];
  for (let i = 0; i < products; i++) {
    const line = catalogProduct(i, version);
    body.push(line);
    lines.push({ op: 'upsert_product', ref: line.product.ref, title: line.product.content.de.title });
    const ref = `D-${Math.floor(i / 20)}`;
    if (i % 20 === 19 && i / 20 < deletable && remaining.has(ref)) {
      body.push({ op: 'delete_product', ref });
      lines.push({ op: 'delete_product', ref });
    }
  }
  return { lines, text: ndjson(body) };
}

/** Which import lines the database shows applied: an upsert's new title is stored, a deleted ref is gone. */
async function appliedLines(world: FaultWorld, lines: ImportLine[]): Promise<boolean[]> {
  // The stored source document is JSON text on both engines: read here, not with either's JSON functions.
  const rows = await world.read((db) =>
    db.rows<{ ref: string; source: string }>('SELECT ref, source FROM products WHERE merchant_id = ?', [world.merchantId]),
  );
  const titles = new Map(rows.map((r) => [r.ref, (JSON.parse(r.source) as { content?: { de?: { title?: string } } }).content?.de?.title]));
  return lines.map((line) => (line.op === 'upsert_product' ? titles.get(line.ref) === line.title : !titles.has(line.ref)));
}

export interface RepricingFaultReport {
  /** The PLN store's price changes the re-pricing had committed when the service was killed (part-way: more than 0, fewer than all). */
  repricedAtKill: number;
  /** How long after the restart the interrupted publish run had ended (resumed by the restarted service). */
  resumedWithinMs: number;
  /** `price` changes of the re-pricing once it completed. */
  repriced: number;
  afterRestart: ConsistencyReport;
  receiver: ReceiverCheck;
}

const PLN_BEFORE = '4.3';
/** The rates a fault attempt sets, one per attempt. */
const PLN_AFTER = ['4.4', '4.45', '4.5', '4.55'];

/**
 * kill -9 part-way through an exchange-rate re-pricing. The rate change commits with a publish run,
 * which re-publishes a chunk per transaction: the kill leaves the new rate, some products
 * re-priced and the run at its position; the restarted service resumes the run once its dead
 * driver's hold has run out (CPS_PUBLISH_RUN_LEASE_MS, short here), and every payload ends as a
 * full recompute with the new rate has it, each product re-priced once, every change delivered.
 */
export async function killDuringRepricing(options: ScenarioOptions): Promise<RepricingFaultReport> {
  const log = options.log ?? (() => {});
  const world = await FaultWorld.create({ database: options.database, publishChunk: options.publishChunk, log });
  try {
    await world.start();
    await world.setupMerchant();
    await world.admin(
      'POST',
      `${world.merchantPath}/imports`,
      ndjson(Array.from({ length: options.products }, (_, i) => catalogProduct(i, 1))),
      'application/x-ndjson',
    );
    log(`  imported ${options.products} products in 3 stores`);
    // Quiet before the fault: nothing in the outbox, so the only long write is the re-pricing.
    await world.drained();
    await world.verify('before the fault');
    await world.admin('PUT', `${world.merchantPath}/exchange-rates/EUR/PLN`, { rate: PLN_BEFORE });
    await world.drained();

    const pl = await world.read((db) => db.value('SELECT id FROM stores WHERE merchant_id = ? AND slug = ?', [world.merchantId, 'pl']));
    const lastChange = () => world.read((db) => db.value('SELECT coalesce(max(id), 0) FROM changes'));
    const rate = () =>
      world.read((db) =>
        db.value<string>("SELECT rate FROM exchange_rates WHERE merchant_id = ? AND base = 'EUR' AND quote = 'PLN'", [world.merchantId]),
      );
    const runsLeft = () => world.read((db) => db.value('SELECT count(*) FROM publish_runs'));
    let before = 0;
    let rateSent = '';
    const priceChangesSince = () =>
      world.read((db) => db.value("SELECT count(*) FROM changes WHERE id > ? AND store_id = ? AND change_type = 'price'", [before, pl]));

    // Killed once a quarter of the PLN store's products are re-priced, the call not yet answered.
    // On a busy machine the re-pricing may finish before this process looks: then try the next rate.
    let repricedAtKill = 0;
    for (let attempt = 0; ; attempt++) {
      if (attempt === PLN_AFTER.length)
        throw new Error(`every re-pricing finished before the kill (${attempt} attempts): use more products`);
      before = await lastChange();
      rateSent = PLN_AFTER[attempt]!;
      const request = track(world.adminRequest('PUT', `${world.merchantPath}/exchange-rates/EUR/PLN`, { rate: rateSent }));
      const sent = Date.now();
      while (!request.state.settled) {
        if (Date.now() - sent > 120_000) throw new Error('the re-pricing never started');
        if ((await priceChangesSince()) >= options.products / 4) break;
        await sleep(1);
      }
      if (request.state.settled) {
        log(`  the re-pricing to ${rateSent} completed before the kill; trying again`);
        await world.drained();
        continue;
      }
      await world.crash();
      await request.done;
      if (request.state.status !== undefined)
        throw new Error(`the re-pricing answered ${request.state.status} although the service was killed`);
      repricedAtKill = await priceChangesSince();
      break;
    }
    if ((await rate()) !== rateSent) throw new Error(`the rate change was not committed with its run: rate ${await rate()}`);
    if (repricedAtKill === 0 || repricedAtKill >= options.products)
      throw new Error(`not killed part-way: ${repricedAtKill} of ${options.products} re-priced`);
    if ((await runsLeft()) !== 1) throw new Error(`expected the interrupted publish run, found ${await runsLeft()}`);
    log(`  killed with ${repricedAtKill} of ${options.products} products of pl re-priced`);

    const restarted = Date.now();
    await world.restart();
    while ((await runsLeft()) > 0) {
      if (Date.now() - restarted > 120_000) throw new Error('the interrupted publish run was never resumed');
      await sleep(20);
    }
    const resumedWithinMs = Date.now() - restarted;
    log(`  the restarted service resumed the run and ended it within ${resumedWithinMs} ms`);
    // The recompute proves it for every payload: each one is resolved with the stored rate.
    const afterRestart = await world.verify('after the restart');
    const repriced = await priceChangesSince();
    if (repriced !== options.products)
      throw new Error(`the rate change re-priced ${repriced} products of pl, once each expected (${options.products})`);
    const elsewhere = await world.read((db) => db.value('SELECT count(*) FROM changes WHERE id > ? AND store_id <> ?', [before, pl]));
    if (elsewhere > 0) throw new Error(`${elsewhere} changes outside the PLN store: EUR->PLN changes only PLN prices`);
    log(`  the rate change re-priced ${repriced} of ${options.products} products in pl, each once, none elsewhere`);
    await world.drained();
    await world.verify('after the deliveries drained');
    const receiver = await world.receiverSawEveryChange();
    return { repricedAtKill, resumedWithinMs, repriced, afterRestart, receiver };
  } finally {
    await world.close();
  }
}

export interface DeliveryFaultReport {
  changes: number;
  /** Outbox rows and unfinished deliveries at the kill. */
  unfinishedAtKill: number;
  receiver: ReceiverCheck;
}

/**
 * Starts `serve` and a burst of deliveries to a receiver that takes 25 ms each: `products` imported
 * in 3 stores, one in 20 of them deleted; resolves once 25 deliveries were made.
 */
async function startDeliveryBurst(world: FaultWorld, products: number, log: (line: string) => void): Promise<void> {
  await world.start();
  await world.setupMerchant();
  await world.admin(
    'POST',
    `${world.merchantPath}/imports`,
    ndjson(Array.from({ length: products }, (_, i) => catalogProduct(i, 1))),
    'application/x-ndjson',
  );
  const removed = Math.floor(products / 20);
  await world.admin(
    'POST',
    `${world.merchantPath}/imports`,
    ndjson(Array.from({ length: removed }, (_, i) => ({ op: 'delete_product', ref: `P-${i * 20}` }))),
    'application/x-ndjson',
  );
  log(`  imported ${products} products in 3 stores, then deleted ${removed}`);
  await world.receiver.waitFor(25, 60_000);
}

/** Outbox rows and deliveries not sent yet (pending or waiting for a retry). */
async function unsentWork(db: DatabaseProbe): Promise<number> {
  return (
    (await db.value('SELECT count(*) FROM webhook_outbox')) +
    (await db.value("SELECT count(*) FROM webhook_deliveries WHERE status IN ('pending', 'failed')"))
  );
}

/**
 * kill -9 during a burst of deliveries (as test/webhooks/crash.test.ts, here with the full
 * recompute too): a receiver that takes 25 ms per delivery, killed after 25 deliveries.
 */
export async function killDuringDeliveries(options: ScenarioOptions): Promise<DeliveryFaultReport> {
  const log = options.log ?? (() => {});
  const world = await FaultWorld.create({
    database: options.database,
    publishChunk: options.publishChunk,
    receiverDelayMs: RECEIVER_DELAY_MS,
    log,
  });
  try {
    await startDeliveryBurst(world, options.products, log);
    await world.crash();
    const atKill = await world.read(async (db) => ({
      changes: await db.value('SELECT count(*) FROM changes'),
      unfinished: await unsentWork(db),
    }));
    if (atKill.unfinished === 0) throw new Error('the kill came after every delivery: make the burst larger');
    log(
      `  killed after ${world.receiver.count} deliveries, with ${atKill.unfinished} outbox rows and deliveries unfinished, ${atKill.changes} changes`,
    );
    await world.restart();
    await world.verify('after the restart (deliveries under way)');
    await world.drained();
    await world.verify('after the deliveries drained');
    const receiver = await world.receiverSawEveryChange();
    return { changes: atKill.changes, unfinishedAtKill: atKill.unfinished, receiver };
  } finally {
    await world.close();
  }
}

export interface ShutdownReport {
  changes: number;
  /** Requests open at the receiver when SIGTERM was sent. */
  inFlightAtStop: number;
  /** Outbox rows and deliveries not yet sent when the process had stopped: handed back, not lost. */
  handedBack: number;
  receiver: ReceiverCheck;
  deliveries: number;
}

/**
 * SIGTERM while deliveries are in flight (graceful shutdown). The process exits 0 after the
 * deliveries in hand are answered and recorded; nothing claimed is left unfinished, so the restart
 * re-sends nothing: every delivery is made exactly once (one attempt each, as many requests as
 * deliveries), and the receiver sees every change.
 */
const RECEIVER_DELAY_MS = 25;
/** Deliveries answered at once before the receiver holds the next ones until the stop is under way. */
const ANSWERED_BEFORE_STOP = 25;

export async function stopDuringDeliveries(options: ScenarioOptions): Promise<ShutdownReport> {
  const log = options.log ?? (() => {});
  const world = await FaultWorld.create({
    database: options.database,
    publishChunk: options.publishChunk,
    receiverDelayMs: RECEIVER_DELAY_MS,
    // The held deliveries wait for a loaded machine to hand serve its SIGTERM: never long enough to
    // time out, nor (the margin) for a delivery claimed ahead behind them to be left to its lease.
    webhookTimeoutMs: 120_000,
    webhookLeaseMarginMs: 120_000,
    log,
  });
  try {
    // The first deliveries are answered; the next ones are held until serve says it is shutting
    // down, so the stop comes while they are in flight and the rest of the burst is still to be
    // sent, however slowly a loaded machine runs either side.
    let releaseHeld!: () => void;
    const stopUnderWay = new Promise<void>((resolve) => (releaseHeld = resolve));
    let answered = 0;
    world.receiver.answer(() =>
      ++answered <= ANSWERED_BEFORE_STOP
        ? { status: 204, delayMs: RECEIVER_DELAY_MS }
        : { status: 204, delayMs: RECEIVER_DELAY_MS, after: stopUnderWay },
    );
    await startDeliveryBurst(world, options.products, log);
    await until(
      () => world.receiver.inFlightNow > 0 && answered > ANSWERED_BEFORE_STOP,
      60_000,
      () => 'no delivery held in flight to stop during',
      1,
    );
    const inFlightAtStop = world.receiver.inFlightNow;
    const terminated = world.terminate();
    await until(
      () => world.service!.output.includes('shutting down'),
      60_000,
      () => `serve did not say it is shutting down:\n${world.service!.output.slice(-2000)}`,
      1,
    );
    // The dispatcher takes no new work now; the deliveries it holds are answered (quickly from now on).
    world.receiver.answer({ status: 204, delayMs: RECEIVER_DELAY_MS });
    releaseHeld();
    const code = await terminated;
    if (code !== 0) throw new Error(`serve exited with ${code} on SIGTERM, not 0`);
    const atStop = await world.read(async (db) => ({
      // Claimed (occurred_at set at the claim) and not finished: these would be sent again.
      claimedUnfinished: await db.value("SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND occurred_at IS NOT NULL"),
      handedBack: await unsentWork(db),
      succeeded: await db.value("SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'"),
    }));
    if (atStop.claimedUnfinished > 0)
      throw new Error(`${atStop.claimedUnfinished} deliveries were claimed and left unfinished by the shutdown`);
    if (atStop.succeeded !== world.receiver.count) {
      const statuses = await world.read((db) =>
        db.rows(
          "SELECT d.id, d.status, d.attempts, (d.occurred_at IS NOT NULL) AS claimed, a.status_code, a.error, a.latency_ms FROM webhook_deliveries d LEFT JOIN webhook_attempts a ON a.delivery_id = d.id WHERE d.status <> 'succeeded' OR a.status_code IS NULL OR a.status_code >= 300",
        ),
      );
      throw new Error(
        `the receiver answered ${world.receiver.count} requests but ${atStop.succeeded} deliveries are recorded as succeeded: ${JSON.stringify(statuses).slice(0, 3000)}`,
      );
    }
    if (atStop.handedBack === 0) throw new Error('the stop came after every delivery: make the burst larger');
    log(
      `  stopped with ${inFlightAtStop} deliveries in flight (all answered and recorded), ${atStop.handedBack} outbox rows and deliveries handed back`,
    );
    await world.restart();
    await world.drained();
    await world.verify('after the restart and the deliveries drained');
    const receiver = await world.receiverSawEveryChange();
    const totals = await world.read(async (db) => ({
      deliveries: await db.value('SELECT count(*) FROM webhook_deliveries'),
      notOnce: await db.value("SELECT count(*) FROM webhook_deliveries WHERE status <> 'succeeded' OR attempts <> 1"),
      attempts: await db.value('SELECT count(*) FROM webhook_attempts'),
      changes: await db.value('SELECT count(*) FROM changes'),
    }));
    if (totals.notOnce > 0) throw new Error(`${totals.notOnce} deliveries were not made exactly once`);
    if (totals.attempts !== totals.deliveries || receiver.requests !== totals.deliveries) {
      throw new Error(
        `${totals.deliveries} deliveries, ${totals.attempts} attempts, ${receiver.requests} requests received: something was sent twice`,
      );
    }
    log(
      `  every one of ${totals.deliveries} deliveries was made exactly once (${totals.attempts} attempts, ${receiver.requests} requests received)`,
    );
    return { changes: totals.changes, inFlightAtStop, handedBack: atStop.handedBack, receiver, deliveries: totals.deliveries };
  } finally {
    await world.close();
  }
}
