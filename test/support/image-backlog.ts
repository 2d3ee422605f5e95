// A synthetic image backlog for measuring claims at scale without building a catalog: one
// merchant, `down` pending images on one origin marked down (image_origins, its probe leased), and
// `live` pending images on a live origin, written in bulk (a recursive CTE on SQLite,
// generate_series on PostgreSQL) into a migrated database.
import Database from 'better-sqlite3';
import pg from 'pg';

export const DOWN_ORIGIN = 'https://down.example';
export const LIVE_ORIGIN = 'https://live.example';

export interface ImageBacklog {
  /** Pending images on the down origin, never fetched but `failed` of them (due at `at`). */
  down: number;
  /** Of those, how many failed once (first_failure_at set): the ones tried before the origin went down. */
  failed: number;
  /** Pending images on the live origin (due at `at`). */
  live: number;
  /** When the images were added (their next attempt), and when the origin went down. */
  at: string;
  downSince: string;
  /** The down origin's next probe (leased by a claim). */
  nextProbeAt: string;
}

/** Writes the backlog for `merchantId` into the database at `location` (a SQLite file or a PostgreSQL URL). */
export async function seedImageBacklog(location: string, merchantId: number, backlog: ImageBacklog): Promise<void> {
  const { down, failed, live, at, downSince, nextProbeAt } = backlog;
  if (!location.startsWith('postgres')) {
    const db = new Database(location);
    try {
      db.transaction(() => {
        const add = db.prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < @count)
          INSERT INTO image_mirrors (merchant_id, url, origin, state, updated_at, next_attempt_at, attempts, first_failure_at, last_error)
          SELECT @merchant, @origin || '/p/' || i || '.jpg', @origin, 'pending', @at, @at,
            CASE WHEN i <= @failed THEN 1 ELSE 0 END, CASE WHEN i <= @failed THEN @down_since END,
            CASE WHEN i <= @failed THEN 'blocked_address' END
          FROM n`);
        add.run({ merchant: merchantId, origin: DOWN_ORIGIN, count: down, failed, at, down_since: downSince });
        add.run({ merchant: merchantId, origin: LIVE_ORIGIN, count: live, failed: 0, at, down_since: downSince });
        db.prepare(`INSERT INTO image_origins (merchant_id, origin, failures, down_since, next_probe_at, probe_ms, last_error)
          VALUES (?, ?, 20, ?, ?, 300000, 'blocked_address')`).run(merchantId, DOWN_ORIGIN, downSince, nextProbeAt);
        db.prepare(`INSERT INTO image_work_merchants (merchant_id, due_at, version) VALUES (?, ?, 0)
          ON CONFLICT (merchant_id) DO UPDATE SET due_at = excluded.due_at, version = version + 1`).run(merchantId, at);
      })();
      db.exec('ANALYZE');
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client(location);
  await client.connect();
  try {
    await client.query('BEGIN');
    const add = `INSERT INTO image_mirrors (merchant_id, url, origin, state, updated_at, next_attempt_at, attempts, first_failure_at, last_error)
      SELECT $1, $2 || '/p/' || i || '.jpg', $2, 'pending', $4, $4,
        CASE WHEN i <= $5 THEN 1 ELSE 0 END, CASE WHEN i <= $5 THEN $6 END, CASE WHEN i <= $5 THEN 'blocked_address' END
      FROM generate_series(1, $3::integer) AS i`;
    await client.query(add, [merchantId, DOWN_ORIGIN, down, at, failed, downSince]);
    await client.query(add, [merchantId, LIVE_ORIGIN, live, at, 0, downSince]);
    await client.query(
      `INSERT INTO image_origins (merchant_id, origin, failures, down_since, next_probe_at, probe_ms, last_error)
      VALUES ($1, $2, 20, $3, $4, 300000, 'blocked_address')`,
      [merchantId, DOWN_ORIGIN, downSince, nextProbeAt],
    );
    await client.query(
      `INSERT INTO image_work_merchants (merchant_id, due_at, version) VALUES ($1, $2, 0)
      ON CONFLICT (merchant_id) DO UPDATE SET due_at = excluded.due_at, version = image_work_merchants.version + 1`,
      [merchantId, at],
    );
    await client.query('COMMIT');
    await client.query('ANALYZE image_mirrors');
  } finally {
    await client.end();
  }
}
