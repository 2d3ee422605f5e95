// Image claims across many merchants with a few images due each (storage port, claimDueImageMirrors):
// a page of due merchants is looked at in a few statements whatever its size (on PostgreSQL one
// statement for their failing origins, one for their due images), merchants still taking turns, each
// merchant's window read only up to its share of the claim, and a merchant asked again for its whole
// window when the others leave the claim short.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CatalogStorage, ClaimedImageMirror } from '../../src/storage/port.js';
import { recordStatements, statementsOf } from '../support/statement-plans.js';
import { storagePerTest, TEST_ENGINE } from '../support/engine.js';

const AT = '2026-11-26T08:00:00.000Z';
const LATER = '2026-11-26T08:30:00.000Z';
const fairness = { perMerchant: 48, perOrigin: 32, busy: [] };

let storage: CatalogStorage;

async function merchantWithImages(name: string, count: number): Promise<number> {
  const merchant = await storage.createMerchant({ name, sku_pattern: null, owner_emails: [], created_at: AT });
  for (let i = 0; i < count; i++)
    await storage.ensureImageMirrors(
      merchant.id,
      [`https://${name.toLowerCase()}.example/${i}.png`],
      `2026-11-26T08:00:${String(i).padStart(2, '0')}.000Z`,
    );
  return merchant.id;
}

const claimed = (images: ClaimedImageMirror[]) => images.map((i) => [i.merchant_id, i.url]);
/** Statements that read or write image work (transaction control and the due merchants' index left out). */
const imageStatements = (ran: { sql: string }[]) => ran.filter((r) => /image_mirrors|image_origins/.test(r.sql));

describe(`image claims across many merchants (${TEST_ENGINE})`, () => {
  beforeAll(() => recordStatements());
  afterAll(() => vi.restoreAllMocks());
  storagePerTest('many-claims', (fresh) => ({ storage } = fresh));

  it("claims the oldest image of each of 40 merchants in turn, reading each merchant's share only, in statements not growing with the merchants", async () => {
    const merchants: number[] = [];
    for (let m = 0; m < 40; m++) merchants.push(await merchantWithImages(`M${String(m).padStart(2, '0')}`, 5));
    let due: ClaimedImageMirror[] = [];
    const ran = await statementsOf(async () => {
      due = await storage.claimDueImageMirrors(LATER, 40, '2026-11-26T08:31:00.000Z', fairness);
    });
    expect(claimed(due)).toEqual(merchants.map((id, m) => [id, `https://m${String(m).padStart(2, '0')}.example/0.png`]));
    if (TEST_ENGINE === 'postgres') {
      // Their failing origins, their due images, the lease: one statement each for the 40.
      expect(imageStatements(ran)).toHaveLength(3);
    } else {
      // One due image read of each merchant (its share of 40), not its whole window of 5.
      const read = ran.filter((r) => /LIMIT (@per_origin|w\.per_origin)/.test(r.sql)).reduce((n, r) => n + (r.returned ?? 0), 0);
      expect(read).toBe(40);
    }

    // Twice the merchants, the same claim: on PostgreSQL as many statements.
    for (let m = 40; m < 80; m++) merchants.push(await merchantWithImages(`M${String(m).padStart(2, '0')}`, 5));
    const again = await statementsOf(async () => {
      due = await storage.claimDueImageMirrors(LATER, 40, '2026-11-26T08:31:00.000Z', fairness);
    });
    // The first 40 in turn order (every hint says 08:00:00; then by id), each its oldest image not leased.
    expect(claimed(due)).toEqual(merchants.slice(0, 40).map((id, m) => [id, `https://m${String(m).padStart(2, '0')}.example/1.png`]));
    if (TEST_ENGINE === 'postgres') expect(imageStatements(again)).toHaveLength(imageStatements(ran).length);
  });

  it('asks a merchant again for its whole window when the other merchants leave the claim short, taking turns as before', async () => {
    const big = await merchantWithImages('Big', 10);
    const [a, b, c] = [await merchantWithImages('Sa', 1), await merchantWithImages('Sb', 1), await merchantWithImages('Sc', 1)];
    let due: ClaimedImageMirror[] = [];
    const ran = await statementsOf(async () => {
      due = await storage.claimDueImageMirrors(LATER, 8, '2026-11-26T08:31:00.000Z', { perMerchant: 8, perOrigin: 8, busy: [] });
    });
    // Each merchant's share of 8 is 2: Big's came back full while the others had one each, so Big is asked for its 8.
    const big_ = (i: number) => [big, `https://big.example/${i}.png`];
    expect(claimed(due)).toEqual([
      big_(0),
      [a, 'https://sa.example/0.png'],
      [b, 'https://sb.example/0.png'],
      [c, 'https://sc.example/0.png'],
      big_(1),
      big_(2),
      big_(3),
      big_(4),
    ]);
    if (TEST_ENGINE === 'postgres') expect(ran.filter((r) => /LIMIT (@per_origin|w\.per_origin)/.test(r.sql))).toHaveLength(2);
  });
});
