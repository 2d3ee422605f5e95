// npx tsx probe.mts REPO URL: an import chunk's source writes (500 new products, then the same 500 with a
// new cost, then unchanged) timed in a transaction that is rolled back, 5 rounds, with REPO's storage code.
const [repo, url] = process.argv.slice(2);
const { openPostgresStorage } = await import(`${repo}/src/storage/postgres/index.ts`);
const { normalizeSource } = await import(`${repo}/src/catalog/product-sources.ts`);
const storage = openPostgresStorage(url!);
await storage.ready;
const merchants = await storage.listMerchants?.(10).catch(() => null);
const merchantId = (await (storage as any).pool.query("SELECT merchant_id FROM products GROUP BY 1 ORDER BY count(*) DESC LIMIT 1")).rows[0].merchant_id;
const line = (n: number, step: number) => ({
  ref: `PROBE-${n}`,
  source: normalizeSource({
    manufacturer: 'Nordkamm',
    content: { de: { title: `Zelt ${n}`, description: `Zelt ${n}.` }, en: { title: `Tent ${n}`, description: `Tent ${n}.` } },
    images: [1, 2].map((i) => ({ url: `http://127.0.0.1:9/p/probe/${n}/${i}.jpg` })),
    offers: [{ supplier_ref: 'alpine-wholesale', quantity: 1 + (n % 40), cost: (10 + step + (n % 97) * 0.19).toFixed(2), currency: 'EUR' }],
    supplier_attributes: [{ supplier_ref: 'alpine-wholesale', key: 'weight', value: '1.5' }],
  }),
});
const times: Record<string, number[]> = {};
const time = async (name: string, fn: () => Promise<unknown>) => {
  const t = performance.now();
  await fn();
  (times[name] ??= []).push(performance.now() - t);
};
for (let round = 0; round < 5; round++) {
  await storage
    .transaction(async (tx: any) => {
      const fresh = Array.from({ length: 500 }, (_, i) => line(i, 0));
      await time('new', () => tx.upsertProductSources(merchantId, fresh, '2026-11-29T09:00:00.000Z'));
      const cost = Array.from({ length: 500 }, (_, i) => line(i, 1.37));
      await time('new cost', () => tx.upsertProductSources(merchantId, cost, '2026-11-29T09:00:01.000Z'));
      await time('unchanged', () => tx.upsertProductSources(merchantId, cost, '2026-11-29T09:00:02.000Z'));
      throw new Error('rollback');
    })
    .catch((error: Error) => {
      if (error.message !== 'rollback') throw error;
    });
}
for (const [name, list] of Object.entries(times)) console.log(name.padEnd(10), list.map((t) => t.toFixed(1)).join(' '), 'min', Math.min(...list).toFixed(1));
await storage.close();
