// docs/testing.md#contract-fuzzing: a property-based contract fuzz over every public and
// admin operation. This is the quick run of `npm test`; `npm run fuzz` sends ten times as many.
// A failure prints the seed and the request's position: `npm run fuzz -- --seed S --requests N`
// replays the run up to it.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestService } from '../support/service.js';
import { FUZZ_LIMITS, formatReport, runContractFuzz, startFuzzService, type FuzzReport } from './engine.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20260601);
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 1200);

let service: TestService;
let report: FuzzReport;

beforeAll(async () => {
  service = await startFuzzService();
  report = await runContractFuzz(service, { seed: SEED, requests: REQUESTS, limits: FUZZ_LIMITS });
}, 120_000);
afterAll(() => service.close());

it("answers every generated request without a 5xx, within the contract, and shows no merchant another merchant's data", () => {
  expect(report.failures, formatReport(report)).toEqual([]);
});

it('exercises every operation of both documents, valid and malformed', () => {
  const unexercised = report.operations.filter((operationId) => !report.byOperation[operationId]);
  expect(unexercised).toEqual([]);
  expect(report.requests).toBe(REQUESTS);
  const statuses = new Set(Object.values(report.byOperation).flatMap((counts) => Object.keys(counts)));
  for (const status of ['200', '400', '401', '404', '413']) expect(statuses).toContain(status);
  // Both admin body limits: size (413) and nesting depth (400), each checked for its documented answer.
  expect(report.byVariant['body nested too deep']).toBeGreaterThan(0);
  expect((report.byVariant['body oversized'] ?? 0) + (report.byVariant['body oversized, chunked'] ?? 0)).toBeGreaterThan(0);
});
