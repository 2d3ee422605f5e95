import { PGlite } from '@electric-sql/pglite';
async function main() {
let t = Date.now();
const db = await PGlite.create();
console.log('create', Date.now() - t); t = Date.now();
const r = await db.query("SELECT 1::int8 AS a, 2.5::numeric AS b, '\\x0102'::bytea AS c, now() AS d, '{\"x\":1}'::jsonb AS e, 3::int4 AS f, 'x'::text AS g", []);
console.log(r, Object.prototype.toString.call(r.rows[0].c), Buffer.isBuffer((r.rows[0] as any).c));
const u = await db.query("CREATE TABLE t (id int)"); console.log(u);
const u2 = await db.query("INSERT INTO t VALUES (1),(2)"); console.log(u2);
const u3 = await db.query("UPDATE t SET id = id + 1"); console.log(u3);
const e = await db.exec("SELECT 1 AS x; SELECT 2 AS y"); console.log(JSON.stringify(e));
t = Date.now(); const c = await db.clone(); console.log('clone', Date.now() - t, (await c.query('SELECT count(*) FROM t')).rows);
}
main();
