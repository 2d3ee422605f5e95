// The image mirror commits the transitions fetched together a merchant at a time, each merchant's in
// a transaction of its own that locks the merchant's products and its change sequencer row until
// COMMIT, in ascending merchant id whatever order their fetches ended in. (When one transaction
// held a batch's merchants, the order kept two processes from deadlocking: in the order of the
// fetches, two `serve`s and a `worker` on PostgreSQL deadlocked 160 times in a minute of
// bench:scale's many-tenants phase; a transaction per merchant holds no two merchants at once.)
import { describe, expect, it } from 'vitest';
import type { ImageMirrorWork } from '../../src/catalog/model.js';
import { transitionsByMerchant } from '../../src/images/mirror.js';

function image(merchant_id: number, url: string): ImageMirrorWork {
  return {
    merchant_id,
    url,
    state: 'pending',
    mirrored_url: null,
    attempts: 0,
    first_failure_at: null,
    next_attempt_at: null,
    last_error: null,
    updated_at: '2026-11-29T00:00:00Z',
  };
}

describe("a commit's merchants", () => {
  it('come in ascending merchant id, whatever order the fetches ended in, each with its transitions in fetch order', () => {
    const mirrored = { state: 'mirrored' as const };
    const batch = [
      { image: image(7, 'https://b.test/7-1.jpg'), patch: mirrored },
      { image: image(3, 'https://a.test/3-1.jpg'), patch: mirrored },
      { image: image(7, 'https://b.test/7-2.jpg'), patch: { state: 'pending' as const } },
      { image: image(5, 'https://a.test/5-1.jpg'), patch: mirrored },
    ];
    const reversed = [...batch].reverse();
    expect(transitionsByMerchant(batch).map(([merchant]) => merchant)).toEqual([3, 5, 7]);
    expect(transitionsByMerchant(reversed).map(([merchant]) => merchant)).toEqual([3, 5, 7]);
    expect(transitionsByMerchant(batch)[2]).toEqual([7, [batch[0], batch[2]]]);
  });
});
