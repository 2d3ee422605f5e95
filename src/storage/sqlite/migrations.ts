// Forward-only schema migrations, applied in order at open (storage/sqlite/index.ts).
// Never edit a released migration: add a new one.

export const migrations: readonly { id: number; name: string; sql: string }[] = [
  {
    id: 1,
    name: 'catalog',
    sql: `
CREATE TABLE merchants (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  sku_pattern TEXT,
  owner_emails TEXT NOT NULL DEFAULT '[]',
  created_at TEXT NOT NULL
);

CREATE TABLE api_keys (
  id INTEGER PRIMARY KEY,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  name TEXT NOT NULL,
  prefix TEXT NOT NULL,
  key_hash BLOB NOT NULL UNIQUE,
  created_at TEXT NOT NULL,
  revoked_at TEXT
);
CREATE INDEX api_keys_merchant ON api_keys(merchant_id);

CREATE TABLE stores (
  id INTEGER PRIMARY KEY,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  slug TEXT NOT NULL,
  name TEXT NOT NULL,
  locale TEXT NOT NULL,
  currency TEXT NOT NULL,
  is_default INTEGER NOT NULL DEFAULT 0,
  active INTEGER NOT NULL DEFAULT 1,
  exclude_out_of_stock INTEGER NOT NULL DEFAULT 0,
  -- bumped whenever the set of products published for the store changes (read-side id index)
  catalog_version INTEGER NOT NULL DEFAULT 0,
  UNIQUE (merchant_id, slug)
);

CREATE TABLE customer_groups (
  id INTEGER PRIMARY KEY,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  name TEXT NOT NULL,
  UNIQUE (merchant_id, name)
);

CREATE TABLE exchange_rates (
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  base TEXT NOT NULL,
  quote TEXT NOT NULL,
  rate TEXT NOT NULL,
  PRIMARY KEY (merchant_id, base, quote)
);

CREATE TABLE suppliers (
  id INTEGER PRIMARY KEY,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  ref TEXT NOT NULL,
  name TEXT NOT NULL,
  UNIQUE (merchant_id, ref)
);

CREATE TABLE attribute_definitions (
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  key TEXT NOT NULL,
  unit TEXT,
  labels TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (merchant_id, key)
);

CREATE TABLE pricing_rules (
  id INTEGER PRIMARY KEY,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  priority INTEGER NOT NULL,
  customer_group_id INTEGER REFERENCES customer_groups(id) ON DELETE CASCADE,
  store_id INTEGER REFERENCES stores(id) ON DELETE CASCADE,
  manufacturer TEXT,
  min_cost TEXT,
  max_cost TEXT,
  markup_percent TEXT NOT NULL DEFAULT '0',
  markup_amount TEXT NOT NULL DEFAULT '0',
  price_ending INTEGER,
  is_catch_all INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX pricing_rules_merchant ON pricing_rules(merchant_id, priority, id);

-- The merchant's source document of a product (admin ProductSourceInput), kept whole.
CREATE TABLE products (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  ref TEXT NOT NULL,
  source TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (merchant_id, ref)
);

-- Mirroring state per image source URL (spec 2.1 image rules); no row = not mirrored yet.
CREATE TABLE image_mirrors (
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  url TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'mirrored', 'dead')),
  mirrored_url TEXT,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (merchant_id, url)
);

-- The resolved payload per (store, product): reads serve these bytes as they are.
CREATE TABLE published_products (
  store_id INTEGER NOT NULL REFERENCES stores(id) ON DELETE CASCADE,
  product_id INTEGER NOT NULL,
  payload TEXT NOT NULL,
  price_hash TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  PRIMARY KEY (store_id, product_id)
);

-- One row per detected change of a published payload (spec 2.6, 6).
CREATE TABLE changes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  store_id INTEGER NOT NULL REFERENCES stores(id) ON DELETE CASCADE,
  product_id INTEGER NOT NULL,
  change_type TEXT NOT NULL CHECK (change_type IN ('price', 'content', 'removed')),
  created_at TEXT NOT NULL
);
CREATE INDEX changes_store ON changes(store_id, id);
`,
  },
  {
    id: 2,
    name: 'store_id_sequence',
    sql: `
-- Store ids are never reused: webhook payloads carry them as store_id, and the read-side index of a
-- store's products is keyed on them. SQLite hands out max(id) + 1, which reuses the id of a
-- deleted newest store, so the high-water mark is kept here.
CREATE TABLE store_id_sequence (last_id INTEGER NOT NULL);
INSERT INTO store_id_sequence (last_id) SELECT coalesce(max(id), 0) FROM stores;
`,
  },
  {
    id: 3,
    name: 'change_feed',
    sql: `
-- Change timestamps are whole UTC seconds and never go back (spec 4.4): the last one handed out.
CREATE TABLE change_clock (id INTEGER PRIMARY KEY CHECK (id = 1), last_at TEXT NOT NULL);
UPDATE changes SET created_at = substr(created_at, 1, 19) || 'Z' WHERE length(created_at) > 20;
INSERT INTO change_clock (id, last_at) SELECT 1, max(created_at) FROM changes HAVING count(*) > 0;

-- Per store, the position of the newest change deleted by retention: a cursor before it is expired.
CREATE TABLE change_horizons (
  store_id INTEGER PRIMARY KEY REFERENCES stores(id) ON DELETE CASCADE,
  created_at TEXT NOT NULL,
  change_id INTEGER NOT NULL
);

DROP INDEX changes_store;
CREATE INDEX changes_feed ON changes(store_id, created_at, id);
CREATE INDEX changes_created ON changes(created_at);
`,
  },
  {
    id: 4,
    name: 'webhooks',
    sql: `
-- Receiver endpoints (spec 3, 4.5) with their health.
CREATE TABLE webhook_endpoints (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  url TEXT NOT NULL,
  store_id INTEGER REFERENCES stores(id) ON DELETE CASCADE,
  events TEXT NOT NULL,
  secret TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'disabled')),
  consecutive_failures INTEGER NOT NULL DEFAULT 0,
  failure_streak_started_at TEXT,
  paused_until TEXT,
  owners_notified_at TEXT,
  disabled_reason TEXT,
  last_success_at TEXT,
  last_failure_at TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX webhook_endpoints_merchant ON webhook_endpoints(merchant_id);

-- The durable outbox: one row per (endpoint, change), written with the change.
CREATE TABLE webhook_outbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  endpoint_id INTEGER NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
  event TEXT NOT NULL,
  store_id INTEGER,
  product_id INTEGER NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX webhook_outbox_group ON webhook_outbox(endpoint_id, event, store_id, id);

CREATE TABLE webhook_deliveries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  endpoint_id INTEGER NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
  event TEXT NOT NULL,
  store_id INTEGER,
  product_ids TEXT NOT NULL,
  occurred_at TEXT,
  status TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed', 'given_up', 'dropped')),
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE status IN ('pending', 'failed');
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries(endpoint_id, id);

CREATE TABLE webhook_attempts (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
  at TEXT NOT NULL,
  status_code INTEGER,
  error TEXT,
  latency_ms INTEGER NOT NULL,
  response_snippet TEXT
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, id);

-- The owners' notifier outbox: always written; e-mailed when SMTP is configured.
CREATE TABLE notifications (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  endpoint_id INTEGER,
  kind TEXT NOT NULL,
  subject TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at TEXT NOT NULL,
  emailed_at TEXT
);
CREATE INDEX notifications_merchant ON notifications(merchant_id, id);
`,
  },
  {
    id: 5,
    name: 'image_mirroring',
    sql: `
-- Mirroring state per image source URL (spec 2.1 image rules, 3 image state): retries and why.
ALTER TABLE image_mirrors ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE image_mirrors ADD COLUMN first_failure_at TEXT;
ALTER TABLE image_mirrors ADD COLUMN next_attempt_at TEXT;
ALTER TABLE image_mirrors ADD COLUMN last_error TEXT;
CREATE INDEX image_mirrors_due ON image_mirrors(next_attempt_at) WHERE state = 'pending';

-- Every image source of every product is known to the mirror from the moment it is imported.
INSERT OR IGNORE INTO image_mirrors (merchant_id, url, state, updated_at, next_attempt_at)
  SELECT products.merchant_id, json_extract(image.value, '$.url'), 'pending', products.updated_at, products.updated_at
  FROM products, json_each(products.source, '$.images') AS image;
`,
  },
  {
    id: 6,
    name: 'operational_counts',
    sql: `
-- /metrics counts images by state on every scrape: from this index, not the whole table.
CREATE INDEX image_mirrors_state ON image_mirrors(state);
-- When the oldest change a delivery carries was recorded (cps_feed_lag_seconds); null before this.
ALTER TABLE webhook_deliveries ADD COLUMN oldest_change_at TEXT;
`,
  },
  {
    id: 7,
    name: 'products_in_id_order',
    sql: `
-- Bulk re-publishing walks a merchant's products in id order, a bounded step at a time: from this
-- index, instead of sorting every product of the merchant again for each step.
CREATE INDEX products_merchant_id ON products(merchant_id, id);
`,
  },
  {
    id: 8,
    name: 'deliveries_due_per_endpoint',
    sql: `
-- A dispatcher claims each active endpoint's first due deliveries (webhook_deliveries_due orders
-- them across endpoints): from this index, however long an endpoint's backlog.
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries(endpoint_id, next_attempt_at, id) WHERE status IN ('pending', 'failed');
`,
  },
  {
    id: 9,
    name: 'panel_accounts',
    sql: `
-- The administration panel's users: each belongs to one merchant; an email signs in once across
-- the deployment. password_hash is scrypt (salt and parameters inside it).
CREATE TABLE panel_users (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  email TEXT NOT NULL UNIQUE,
  role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
  password_hash TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX panel_users_merchant ON panel_users(merchant_id, id);

-- Single-use invitation links (only their SHA-256 is kept), valid until expires_at.
CREATE TABLE panel_invitations (
  token_hash BLOB PRIMARY KEY,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  email TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  used_at TEXT
);

-- Sessions live in the database so that every process behind a load balancer shares them.
CREATE TABLE panel_sessions (
  token_hash BLOB PRIMARY KEY,
  user_id INTEGER REFERENCES panel_users(id) ON DELETE CASCADE,
  operator INTEGER NOT NULL DEFAULT 0,
  csrf_token TEXT NOT NULL,
  created_at TEXT NOT NULL,
  last_seen_at TEXT NOT NULL,
  expires_at TEXT NOT NULL
);

-- Failed sign-ins, per account and per address, for throttling.
CREATE TABLE panel_sign_in_failures (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  subject TEXT NOT NULL,
  at TEXT NOT NULL
);
CREATE INDEX panel_sign_in_failures_subject ON panel_sign_in_failures(subject, at);

-- Every change made in the panel: who, what, when.
CREATE TABLE audit_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  at TEXT NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX audit_log_merchant ON audit_log(merchant_id, id);
`,
  },
  {
    id: 10,
    name: 'change_sequences',
    sql: `
-- The change feed's positions per merchant (spec 4.4): ids come from the merchant's own sequence, so
-- a cursor reveals nothing of other merchants' activity, and created_at is monotonic per merchant.
-- The sequencer row is advanced in the write's transaction, so positions follow commit order.
CREATE TABLE change_sequences (
  merchant_id INTEGER PRIMARY KEY REFERENCES merchants(id) ON DELETE CASCADE,
  last_id INTEGER NOT NULL,
  last_at TEXT NOT NULL
);
CREATE TABLE changes_per_merchant (
  merchant_id INTEGER NOT NULL,
  id INTEGER NOT NULL,
  store_id INTEGER NOT NULL REFERENCES stores(id) ON DELETE CASCADE,
  product_id INTEGER NOT NULL,
  change_type TEXT NOT NULL CHECK (change_type IN ('price', 'content', 'removed')),
  created_at TEXT NOT NULL,
  PRIMARY KEY (merchant_id, id)
);
-- Recorded changes keep their ids, so the cursors integrators hold stay exact; each merchant's
-- sequence goes on from the largest id (and latest time) its feeds have shown, pruned ones included.
INSERT INTO changes_per_merchant (merchant_id, id, store_id, product_id, change_type, created_at)
  SELECT s.merchant_id, c.id, c.store_id, c.product_id, c.change_type, c.created_at
  FROM changes AS c JOIN stores AS s ON s.id = c.store_id;
INSERT INTO change_sequences (merchant_id, last_id, last_at)
  SELECT merchant_id, max(id), max(at) FROM (
    SELECT merchant_id, id, created_at AS at FROM changes_per_merchant
    UNION ALL
    SELECT s.merchant_id, h.change_id, h.created_at FROM change_horizons AS h JOIN stores AS s ON s.id = h.store_id)
  GROUP BY merchant_id;
DROP TABLE changes;
ALTER TABLE changes_per_merchant RENAME TO changes;
CREATE INDEX changes_feed ON changes(store_id, created_at, id);
CREATE INDEX changes_created ON changes(created_at);
DROP TABLE change_clock;
`,
  },
  {
    id: 11,
    name: 'dispatch_leases',
    sql: `
-- Several dispatchers on one database: a claimed delivery is in flight until its
-- attempt is recorded or its lease expires, whichever process claimed it; a claim counts an
-- endpoint's unexpired leases against its concurrency. Null when not leased.
ALTER TABLE webhook_deliveries ADD COLUMN leased_until TEXT;
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries(endpoint_id, leased_until) WHERE leased_until IS NOT NULL;
`,
  },
  {
    id: 12,
    name: 'published_sku_ean',
    sql: `
-- The panel's catalog search finds a store's products by the exact SKU or EAN of their payload:
-- from these indexes (store, field, product id: the matches come out in id order), not a scan of
-- the store's rows. The expressions are exactly the ones findPublishedProducts queries.
CREATE INDEX published_products_sku ON published_products(store_id, json_extract(payload, '$.sku'), product_id);
CREATE INDEX published_products_ean ON published_products(store_id, json_extract(payload, '$.ean'), product_id);
`,
  },
  {
    id: 13,
    name: 'import_jobs',
    sql: `
-- NDJSON imports (admin importProducts, the panel's upload): progress while one runs and its outcome,
-- in the database so that any process shows an import another one runs. problems is a JSON array of
-- the bad lines ({name, reason}), at most as many as a rejection lists.
CREATE TABLE import_jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  started_by TEXT NOT NULL,
  file_name TEXT,
  state TEXT NOT NULL CHECK (state IN ('running', 'succeeded', 'failed')),
  started_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  finished_at TEXT,
  lines_read INTEGER NOT NULL DEFAULT 0,
  operations INTEGER,
  products_applied INTEGER NOT NULL DEFAULT 0,
  upserted INTEGER NOT NULL DEFAULT 0,
  deleted INTEGER NOT NULL DEFAULT 0,
  error TEXT,
  problems TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX import_jobs_merchant ON import_jobs(merchant_id, id);
`,
  },
  {
    id: 15,
    name: 'image_claims_per_merchant',
    sql: `
-- Fair image claims take each merchant's oldest due work: one index probe per merchant.
CREATE INDEX image_mirrors_due_per_merchant ON image_mirrors(merchant_id, next_attempt_at) WHERE state = 'pending';
`,
  },
  {
    id: 16,
    name: 'bounded_statements',
    sql: `
-- No statement costs O(catalog). What a product's source refers to (its image URLs, the
-- stores it is excluded from, its suppliers) as rows kept in the source's transaction
-- (product-sources.ts), so "the products that show this image" is an index range.
CREATE TABLE product_links (
  merchant_id INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('image', 'excluded_store', 'supplier')),
  value TEXT NOT NULL,
  product_id INTEGER NOT NULL,
  PRIMARY KEY (merchant_id, kind, value, product_id)
) WITHOUT ROWID;
CREATE INDEX product_links_product ON product_links(product_id);
INSERT OR IGNORE INTO product_links (merchant_id, kind, value, product_id)
  SELECT p.merchant_id, 'image', json_extract(i.value, '$.url'), p.id FROM products AS p, json_each(p.source, '$.images') AS i
  UNION ALL SELECT p.merchant_id, 'excluded_store', e.value, p.id FROM products AS p, json_each(p.source, '$.excluded_stores') AS e
  UNION ALL SELECT p.merchant_id, 'supplier', json_extract(o.value, '$.supplier_ref'), p.id FROM products AS p, json_each(p.source, '$.offers') AS o
  UNION ALL SELECT p.merchant_id, 'supplier', json_extract(a.value, '$.supplier_ref'), p.id FROM products AS p, json_each(p.source, '$.supplier_attributes') AS a;

-- An image's origin is stored (claims take turns per origin from an index, not by parsing every URL),
-- and how many products list it (only listed images are counted and shown).
ALTER TABLE image_mirrors ADD COLUMN origin TEXT;
ALTER TABLE image_mirrors ADD COLUMN listed INTEGER NOT NULL DEFAULT 0;
UPDATE image_mirrors SET origin = lower(substr(url, 1, instr(url, '://') + instr(substr(url, instr(url, '://') + 3) || '/', '/') + 1));
UPDATE image_mirrors SET listed = (SELECT count(*) FROM product_links AS l
  WHERE l.merchant_id = image_mirrors.merchant_id AND l.kind = 'image' AND l.value = image_mirrors.url);
CREATE INDEX image_mirrors_pending_origin ON image_mirrors(merchant_id, origin, next_attempt_at) WHERE state = 'pending';
CREATE INDEX image_mirrors_dead_listed ON image_mirrors(merchant_id, updated_at) WHERE state = 'dead' AND listed > 0;

-- The listed images per merchant and state, kept by these triggers (the images summary reads them).
CREATE TABLE image_state_counts (
  merchant_id INTEGER NOT NULL,
  state TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (merchant_id, state)
) WITHOUT ROWID;
INSERT INTO image_state_counts (merchant_id, state, n)
  SELECT merchant_id, state, count(*) FROM image_mirrors WHERE listed > 0 GROUP BY merchant_id, state;
CREATE TRIGGER image_mirrors_counted_insert AFTER INSERT ON image_mirrors WHEN NEW.listed > 0 BEGIN
  INSERT INTO image_state_counts (merchant_id, state, n) VALUES (NEW.merchant_id, NEW.state, 1)
    ON CONFLICT (merchant_id, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER image_mirrors_counted_update AFTER UPDATE OF state, listed ON image_mirrors
  WHEN OLD.state IS NOT NEW.state OR (OLD.listed > 0) IS NOT (NEW.listed > 0) BEGIN
  UPDATE image_state_counts SET n = n - 1 WHERE OLD.listed > 0 AND merchant_id = OLD.merchant_id AND state = OLD.state;
  INSERT INTO image_state_counts (merchant_id, state, n) SELECT NEW.merchant_id, NEW.state, 1 WHERE NEW.listed > 0
    ON CONFLICT (merchant_id, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER image_mirrors_counted_delete AFTER DELETE ON image_mirrors WHEN OLD.listed > 0 BEGIN
  UPDATE image_state_counts SET n = n - 1 WHERE merchant_id = OLD.merchant_id AND state = OLD.state;
END;

-- Merchants with pending images, and a lower bound of when the earliest is due (storage/image-claims.ts):
-- a claim visits the merchants with due work, never every merchant.
CREATE TABLE image_work_merchants (
  merchant_id INTEGER PRIMARY KEY,
  due_at TEXT NOT NULL,
  version INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX image_work_merchants_due ON image_work_merchants(due_at, merchant_id);
INSERT INTO image_work_merchants (merchant_id, due_at)
  SELECT merchant_id, min(next_attempt_at) FROM image_mirrors WHERE state = 'pending' AND next_attempt_at IS NOT NULL GROUP BY merchant_id;
`,
  },
  {
    id: 17,
    name: 'published_exclusions',
    sql: `
-- A store's counts by exclusion reason (panel overview and catalog) are kept, not counted
-- over every payload; the excluded-only list is an index range. The reason is the payload's own
-- (upsertPublished writes both), NULL for a product that is not excluded.
ALTER TABLE published_products ADD COLUMN exclusion_reason TEXT;
UPDATE published_products SET exclusion_reason = json_extract(payload, '$.exclusion_reason');
CREATE INDEX published_products_excluded ON published_products(store_id, product_id) WHERE exclusion_reason IS NOT NULL;
-- Per store: the published products per exclusion reason ('' for the ones not excluded).
CREATE TABLE published_counts (
  store_id INTEGER NOT NULL REFERENCES stores(id) ON DELETE CASCADE,
  exclusion_reason TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (store_id, exclusion_reason)
) WITHOUT ROWID;
INSERT INTO published_counts (store_id, exclusion_reason, n)
  SELECT store_id, coalesce(exclusion_reason, ''), count(*) FROM published_products GROUP BY store_id, coalesce(exclusion_reason, '');
CREATE TRIGGER published_counted_insert AFTER INSERT ON published_products BEGIN
  INSERT INTO published_counts (store_id, exclusion_reason, n) VALUES (NEW.store_id, coalesce(NEW.exclusion_reason, ''), 1)
    ON CONFLICT (store_id, exclusion_reason) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER published_counted_update AFTER UPDATE OF exclusion_reason ON published_products
  WHEN OLD.exclusion_reason IS NOT NEW.exclusion_reason BEGIN
  UPDATE published_counts SET n = n - 1 WHERE store_id = OLD.store_id AND exclusion_reason = coalesce(OLD.exclusion_reason, '');
  INSERT INTO published_counts (store_id, exclusion_reason, n) VALUES (NEW.store_id, coalesce(NEW.exclusion_reason, ''), 1)
    ON CONFLICT (store_id, exclusion_reason) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER published_counted_delete AFTER DELETE ON published_products BEGIN
  UPDATE published_counts SET n = n - 1 WHERE store_id = OLD.store_id AND exclusion_reason = coalesce(OLD.exclusion_reason, '');
END;
`,
  },
  {
    id: 18,
    name: 'changes_in_pruning_order',
    sql: `
-- Retention deletes the oldest changes in (created_at, merchant, id) order, a bounded
-- batch at a time: from this index, without sorting every change of a second (one re-pricing
-- records all its changes in one second).
DROP INDEX changes_created;
CREATE INDEX changes_created ON changes(created_at, merchant_id, id);
`,
  },
  {
    id: 19,
    name: 'waiting_work_indexes',
    sql: `
-- The panel's delivery log filtered by status pages by keyset over this index, however
-- rare the status among an endpoint's deliveries.
CREATE INDEX webhook_deliveries_endpoint_status ON webhook_deliveries(endpoint_id, status, id);
-- The oldest change waiting per endpoint (overview's feed lag, /metrics): one probe per endpoint,
-- not a read of its whole outbox or backlog during a storm.
CREATE INDEX webhook_outbox_waiting ON webhook_outbox(endpoint_id, created_at);
CREATE INDEX webhook_deliveries_unattempted ON webhook_deliveries(endpoint_id, coalesce(oldest_change_at, created_at)) WHERE status = 'pending' AND attempts = 0;
`,
  },
  {
    id: 20,
    name: 'published_blocks',
    sql: `
-- Where a position of a store's id order is (numbered pages, meta.total), without
-- reading every id of the store: its published products per block of 1024 ids (product_id >> 10,
-- records.ts PUBLISHED_BLOCK_BITS), kept by these triggers. A page is found in its block's index
-- range: at most 1,023 index entries are skipped to reach it.
CREATE TABLE published_blocks (
  store_id INTEGER NOT NULL REFERENCES stores(id) ON DELETE CASCADE,
  block INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (store_id, block)
) WITHOUT ROWID;
INSERT INTO published_blocks (store_id, block, n)
  SELECT store_id, product_id >> 10, count(*) FROM published_products GROUP BY store_id, product_id >> 10;
CREATE TRIGGER published_blocks_insert AFTER INSERT ON published_products BEGIN
  INSERT INTO published_blocks (store_id, block, n) VALUES (NEW.store_id, NEW.product_id >> 10, 1)
    ON CONFLICT (store_id, block) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER published_blocks_delete AFTER DELETE ON published_products BEGIN
  UPDATE published_blocks SET n = n - 1 WHERE store_id = OLD.store_id AND block = OLD.product_id >> 10;
END;
`,
  },
  {
    id: 21,
    name: 'unused_image_indexes',
    sql: `
-- Claims take due work per merchant and origin (migration 16) and /metrics reads kept counts: these
-- two indexes are read by nothing now, and every image state change paid for them.
DROP INDEX image_mirrors_due;
DROP INDEX image_mirrors_state;
`,
  },
  {
    id: 22,
    name: 'published_counted_per_statement',
    sql: `
-- PostgreSQL's statement-level counting triggers; SQLite's triggers run in process
-- and stay per row. Kept so that both engines number their migrations alike.
SELECT 1;
`,
  },
  {
    id: 23,
    name: 'published_sku_ean_columns',
    sql: `
-- PostgreSQL keeps sku and ean as columns; SQLite reads them from the payload as before.
SELECT 1;
`,
  },
  {
    id: 24,
    name: 'image_states_counted_per_statement',
    sql: `
-- PostgreSQL's statement-level image counts; SQLite's stay per row.
SELECT 1;
`,
  },
  {
    id: 25,
    name: 'publish_runs',
    sql: `
-- Re-publishing a whole catalog (a rate, rule, group or store setting changed) commits a
-- chunk at a time, not in one transaction as long as the catalog; a run remembers how far it got,
-- so a run its process stopped is resumed from there (catalog/publish-runs.ts).
CREATE TABLE publish_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  store_ids TEXT,
  after_product_id INTEGER NOT NULL,
  driver TEXT NOT NULL,
  leased_until TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX publish_runs_lease ON publish_runs(leased_until, id);
`,
  },
  {
    id: 26,
    name: 'image_state_counted_at_commit',
    sql: `
-- PostgreSQL counts image transitions at COMMIT (hot rows across processes); SQLite has one writer.
SELECT 1;
`,
  },
  {
    id: 27,
    name: 'import_runs',
    sql: `
-- An import's checked operations are staged, a chunk per row, and applied by a publish
-- run (a chunk per transaction), so that serve's publishing thread applies them, off the serving
-- loop, and a run its process left is resumed from its next chunk (admin/import-jobs.ts).
ALTER TABLE publish_runs ADD COLUMN import_job_id INTEGER REFERENCES import_jobs(id);
ALTER TABLE import_jobs ADD COLUMN error_code TEXT;
CREATE TABLE import_job_chunks (
  job_id INTEGER NOT NULL REFERENCES import_jobs(id),
  seq INTEGER NOT NULL,
  operations TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
);
`,
  },
  {
    id: 28,
    name: 'image_claims_by_origin_only',
    sql: `
-- PostgreSQL drops an index its planner misused (image claims); SQLite's plans are checked by the tests.
SELECT 1;
`,
  },
  {
    id: 29,
    name: 'image_inserts_counted_at_commit',
    sql: `
-- PostgreSQL counts image inserts at COMMIT (a deadlock across processes); SQLite has one writer.
SELECT 1;
`,
  },
  {
    id: 30,
    name: 'webhook_secret_rotation',
    sql: `
-- A rotated secret is pending while the old one (secret) keeps signing, until
-- pending_secret_until or until the merchant confirms it (webhooks/signing.ts, secretsAt).
ALTER TABLE webhook_endpoints ADD COLUMN pending_secret TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN secret_rotated_at TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN pending_secret_until TEXT;
`,
  },
  {
    id: 33,
    name: 'currency_links',
    sql: `
-- Costs convert through intermediate currencies, so a changed rate can re-price a store
-- of any currency; which ones depends on the currencies the merchant's offers and own stock are in.
-- Those are links of the product (product-links.ts): "does a product bill in USD" is a probe of the
-- primary key. SQLite cannot widen a CHECK: the table is rebuilt with the new kind.
CREATE TABLE product_links_33 (
  merchant_id INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('image', 'excluded_store', 'supplier', 'currency')),
  value TEXT NOT NULL,
  product_id INTEGER NOT NULL,
  PRIMARY KEY (merchant_id, kind, value, product_id)
) WITHOUT ROWID;
INSERT INTO product_links_33 (merchant_id, kind, value, product_id) SELECT merchant_id, kind, value, product_id FROM product_links;
DROP TABLE product_links;
ALTER TABLE product_links_33 RENAME TO product_links;
CREATE INDEX product_links_product ON product_links(product_id);
INSERT OR IGNORE INTO product_links (merchant_id, kind, value, product_id)
  SELECT p.merchant_id, 'currency', json_extract(o.value, '$.currency'), p.id FROM products AS p, json_each(p.source, '$.offers') AS o
    WHERE json_extract(o.value, '$.currency') IS NOT NULL
  UNION ALL SELECT p.merchant_id, 'currency', json_extract(p.source, '$.own_stock.currency'), p.id FROM products AS p
    WHERE json_extract(p.source, '$.own_stock.currency') IS NOT NULL;
`,
  },
  {
    id: 34,
    name: 'import_jobs_running',
    sql: `
-- The running import jobs, for the look that ends those whose process is gone.
CREATE INDEX import_jobs_running ON import_jobs(updated_at) WHERE state = 'running';
`,
  },
  {
    id: 35,
    name: 'panel_links_and_flashes',
    sql: `
-- Invitation links get an id (listed and revoked by it), a revocation, and
-- a purpose: an invitation creates the e-mail's account, a reset sets a new password for an existing
-- one. SQLite cannot add an id to a table keyed by token_hash: the table is rebuilt.
CREATE TABLE panel_invitations_35 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  token_hash BLOB NOT NULL UNIQUE,
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  email TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
  purpose TEXT NOT NULL DEFAULT 'invitation' CHECK (purpose IN ('invitation', 'reset')),
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  used_at TEXT,
  revoked_at TEXT
);
INSERT INTO panel_invitations_35 (token_hash, merchant_id, email, role, created_at, expires_at, used_at)
  SELECT token_hash, merchant_id, email, role, created_at, expires_at, used_at FROM panel_invitations ORDER BY created_at, rowid;
DROP TABLE panel_invitations;
ALTER TABLE panel_invitations_35 RENAME TO panel_invitations;
CREATE INDEX panel_invitations_pending ON panel_invitations(merchant_id, email) WHERE used_at IS NULL AND revoked_at IS NULL;

-- Setting a password ends the account's other sessions: found by user.
CREATE INDEX panel_sessions_user ON panel_sessions(user_id);

-- A secret shown once (a new key, a signing secret, an invitation link) waits here, sealed with a key
-- only the session's cookie holds, between the POST that made it and the one GET that shows it.
CREATE TABLE panel_flashes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_hash BLOB NOT NULL REFERENCES panel_sessions(token_hash) ON DELETE CASCADE,
  sealed BLOB NOT NULL,
  expires_at TEXT NOT NULL
);
CREATE INDEX panel_flashes_session ON panel_flashes(session_hash);
CREATE INDEX panel_flashes_expiry ON panel_flashes(expires_at);
`,
  },
  {
    id: 36,
    name: 'truthful_health',
    sql: `
-- A notification's condition ends (the endpoint delivers again, resumes, is re-enabled):
-- the open ones of an endpoint are found by this index when its health changes.
ALTER TABLE notifications ADD COLUMN ended_at TEXT;
CREATE INDEX notifications_open ON notifications(endpoint_id) WHERE ended_at IS NULL;
-- The success-rate charts read an endpoint's attempts counted per UTC hour ('YYYY-MM-DDTHH')
-- and outcome, kept by this trigger as the attempt log grows: a chart reads at most 7 x 24 x 3 rows of
-- one primary-key range, where grouping the log itself read every attempt of the week (100,000 of
-- an endpoint took the serving thread 150-400 ms). Outcomes: no error is a success; an error
-- without a status code, no response; any other error (an answer not 2xx, or not recorded), failed.
CREATE TABLE webhook_attempt_hours (
  endpoint_id INTEGER NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
  hour TEXT NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'no_response')),
  attempts INTEGER NOT NULL,
  latency_sum_ms INTEGER NOT NULL,
  latency_max_ms INTEGER NOT NULL,
  PRIMARY KEY (endpoint_id, hour, outcome)
) WITHOUT ROWID;
INSERT INTO webhook_attempt_hours (endpoint_id, hour, outcome, attempts, latency_sum_ms, latency_max_ms)
  SELECT d.endpoint_id, substr(a.at, 1, 13),
    CASE WHEN a.error IS NULL THEN 'succeeded' WHEN a.status_code IS NULL THEN 'no_response' ELSE 'failed' END,
    count(*), sum(a.latency_ms), max(a.latency_ms)
  FROM webhook_attempts AS a JOIN webhook_deliveries AS d ON d.id = a.delivery_id GROUP BY 1, 2, 3;
CREATE TRIGGER webhook_attempt_hours_counted AFTER INSERT ON webhook_attempts BEGIN
  INSERT INTO webhook_attempt_hours (endpoint_id, hour, outcome, attempts, latency_sum_ms, latency_max_ms)
    SELECT d.endpoint_id, substr(NEW.at, 1, 13),
      CASE WHEN NEW.error IS NULL THEN 'succeeded' WHEN NEW.status_code IS NULL THEN 'no_response' ELSE 'failed' END,
      1, NEW.latency_ms, NEW.latency_ms
    FROM webhook_deliveries AS d WHERE d.id = NEW.delivery_id
    ON CONFLICT (endpoint_id, hour, outcome) DO UPDATE SET attempts = attempts + 1,
      latency_sum_ms = latency_sum_ms + excluded.latency_sum_ms, latency_max_ms = max(latency_max_ms, excluded.latency_max_ms);
END;
-- Notifications recorded before this migration ended with their endpoint's first successful attempt
-- after them (a success ends every condition); the others stay open. One pass over the attempt log.
CREATE TEMP TABLE endpoint_successes AS
  SELECT d.endpoint_id, a.at FROM webhook_attempts AS a JOIN webhook_deliveries AS d ON d.id = a.delivery_id
  WHERE a.error IS NULL AND d.endpoint_id IN (SELECT endpoint_id FROM notifications);
CREATE INDEX temp.endpoint_successes_at ON endpoint_successes(endpoint_id, at);
UPDATE notifications SET ended_at = (SELECT min(s.at) FROM endpoint_successes AS s
  WHERE s.endpoint_id = notifications.endpoint_id AND s.at > notifications.created_at)
  WHERE endpoint_id IS NOT NULL;
DROP TABLE endpoint_successes;
-- When each API key was last used, written at most once per CPS_API_KEY_LAST_USED_SECONDS.
ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;
`,
  },
  {
    id: 37,
    name: 'inspectable_deliveries',
    sql: `
-- A test delivery is marked; a resend names the delivery it replaces, which names its
-- latest resend; each attempt keeps the request it sent (the URL, and the headers as JSON: the
-- timestamp and signature, never the secret). Older attempts have none (NULL).
ALTER TABLE webhook_deliveries ADD COLUMN test INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_deliveries ADD COLUMN replaces INTEGER;
ALTER TABLE webhook_deliveries ADD COLUMN replaced_by INTEGER;
ALTER TABLE webhook_attempts ADD COLUMN request_url TEXT;
ALTER TABLE webhook_attempts ADD COLUMN request_headers TEXT;
`,
  },
  {
    id: 38,
    name: 'standard_webhooks_and_endpoint_rates',
    sql: `
-- An endpoint may also receive the Standard Webhooks headers.
ALTER TABLE webhook_endpoints ADD COLUMN standard_webhooks INTEGER NOT NULL DEFAULT 0;
-- The most deliveries a second it receives (NULL: no limit), and when its next
-- delivery may start, shared by every process's claims (a table of its own: a claim never writes
-- the endpoint's row, which attempts' health updates and coalescing passes hold).
ALTER TABLE webhook_endpoints ADD COLUMN max_per_second INTEGER;
CREATE TABLE webhook_endpoint_rates (
  endpoint_id INTEGER PRIMARY KEY REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
  next_at TEXT NOT NULL
);
`,
  },
  {
    id: 39,
    name: 'scoped_api_keys',
    sql: `
-- What a key may do (a JSON list of scopes: every key issued before is a catalog:read key) and,
-- optionally, the store slugs it is restricted to (NULL: every store of its merchant).
ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT '["catalog:read"]';
ALTER TABLE api_keys ADD COLUMN stores TEXT;
-- Which key made a change (NULL: the operator or a panel user), so a key's writes can be listed.
ALTER TABLE audit_log ADD COLUMN api_key_id INTEGER REFERENCES api_keys(id);
CREATE INDEX audit_log_api_key ON audit_log(merchant_id, api_key_id, id);
`,
  },
  {
    id: 40,
    name: 'idempotency_keys',
    sql: `
-- The admin API's idempotency keys, per credential: the first request's hash, the run holding the
-- key while it runs (its lease renewed), whether its write committed (set in that write's own
-- transaction), and its answer once given; deleted CPS_IDEMPOTENCY_HOURS after the first request.
CREATE TABLE idempotency_keys (
  credential TEXT NOT NULL,
  key TEXT NOT NULL,
  request_hash TEXT,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  owner TEXT,
  leased_until TEXT,
  write_committed INTEGER NOT NULL DEFAULT 0,
  status INTEGER,
  headers TEXT,
  body TEXT,
  PRIMARY KEY (credential, key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys(expires_at);
`,
  },
  {
    id: 41,
    name: 'api_key_expiry_and_roll',
    sql: `
-- When a key stops working (NULL: never), set at issue or by a roll of the key: an expired key is
-- refused as a revoked one is. A key issued by a roll names the key it replaces.
ALTER TABLE api_keys ADD COLUMN expires_at TEXT;
ALTER TABLE api_keys ADD COLUMN rolled_from INTEGER REFERENCES api_keys(id);
`,
  },
  {
    id: 42,
    name: 'image_origins',
    sql: `
-- The image origins (scheme, host, port) of a merchant that failed last: their failures in a row
-- (DNS, refused or blocked address, connect error, time-out, 5xx) and, once CPS_IMAGE_ORIGIN_FAILURES
-- are reached, since when the origin is down, when its next probe is due and the probe interval.
-- A down origin's images are not claimed but for one probe at a time; its first success deletes the row.
CREATE TABLE image_origins (
  merchant_id INTEGER NOT NULL REFERENCES merchants(id),
  origin TEXT NOT NULL,
  failures INTEGER NOT NULL DEFAULT 0,
  down_since TEXT,
  next_probe_at TEXT,
  probe_ms INTEGER,
  PRIMARY KEY (merchant_id, origin)
);
`,
  },
  {
    id: 43,
    name: 'image_origin_backlog',
    sql: `
-- The error of a failing origin's last fetch (what its waiting images die of, once their own
-- CPS_IMAGE_DEAD_AFTER_HOURS are up), and the pending images by their first failure per origin:
-- a down origin's images whose own time is up are found from it, never by reading its backlog.
ALTER TABLE image_origins ADD COLUMN last_error TEXT;
CREATE INDEX image_mirrors_pending_first_failure ON image_mirrors(merchant_id, origin, first_failure_at)
  WHERE state = 'pending' AND first_failure_at IS NOT NULL;
`,
  },
  {
    id: 44,
    name: 'published_sku_ean_columns',
    sql: `
-- Migration 12's indexes parsed every payload written (an update twice: its old key and its new),
-- about a third of the published upsert's time. The payload's sku and ean are kept beside it
-- instead, as resolution wrote them (upsertPublished writes all three; a row whose fields are not
-- given reads them from the payload), and indexed as they were (PostgreSQL's migration 23).
ALTER TABLE published_products ADD COLUMN sku TEXT;
ALTER TABLE published_products ADD COLUMN ean TEXT;
DROP INDEX published_products_sku;
DROP INDEX published_products_ean;
UPDATE published_products SET sku = json_extract(payload, '$.sku'), ean = json_extract(payload, '$.ean');
CREATE INDEX published_products_sku ON published_products(store_id, sku, product_id);
CREATE INDEX published_products_ean ON published_products(store_id, ean, product_id);
`,
  },
  {
    id: 45,
    name: 'outbox_window',
    sql: `
-- Coalescing reads the outbox by its primary key (a window of the oldest rows, grouped as it is
-- read) and holds the rows it batches by id: the index by (endpoint, event, store, id) that passes
-- read each group through only cost every outbox row's insert and delete a third B-tree.
DROP INDEX webhook_outbox_group;
`,
  },
  {
    id: 46,
    name: 'image_mirrors_vacuumed_often',
    sql: `
-- PostgreSQL's autovacuum settings for image_mirrors; SQLite has no VACUUM of dead index entries to
-- tune. Kept so that both engines number their migrations alike.
SELECT 1;
`,
  },
  {
    id: 47,
    name: 'outbox_rows_carry_products',
    sql: `
-- An outbox row carries every product of one write for one (endpoint, event, store): a JSON array
-- of product ids, in the order the write changed them, and their count. A row per (change,
-- endpoint) cost each change a row written at import and read and deleted at coalescing.
ALTER TABLE webhook_outbox ADD COLUMN product_ids TEXT NOT NULL DEFAULT '[]';
ALTER TABLE webhook_outbox ADD COLUMN product_count INTEGER NOT NULL DEFAULT 1;
UPDATE webhook_outbox SET product_ids = json_array(product_id);
ALTER TABLE webhook_outbox DROP COLUMN product_id;
`,
  },
  {
    id: 48,
    name: 'image_states_counted_per_statement_without_waiting',
    sql: `
-- PostgreSQL's image state counts per statement, as deltas folded by whoever gets the merchant's
-- lock without waiting, and room for HOT updates of published payloads and sources; SQLite's
-- writers are serialized and its triggers already count inside the one write transaction. Kept so
-- that both engines number their migrations alike.
SELECT 1;
`,
  },
  {
    id: 49,
    name: 'published_counts_kept_by_writes',
    sql: `
-- A store's counts per exclusion reason and per block of ids (migrations 17 and 20) are kept by the
-- writes of published_products (storage/sqlite/published.ts): a delta per key a statement, where
-- these triggers upserted both counts rows for every payload written, a third of the payloads'
-- statement time when an import adds products.
DROP TRIGGER published_counted_insert;
DROP TRIGGER published_counted_update;
DROP TRIGGER published_counted_delete;
DROP TRIGGER published_blocks_insert;
DROP TRIGGER published_blocks_delete;
`,
  },
  {
    id: 50,
    name: 'deliveries_due_index_dropped',
    sql: `
-- Claims find each active endpoint's due deliveries in webhook_deliveries_endpoint_due (endpoint,
-- next attempt, id); nothing has read the index of every endpoint's due deliveries by time since
-- then, yet each delivery wrote it three times (inserted pending, leased, recorded).
DROP INDEX webhook_deliveries_due;
`,
  },
  {
    id: 51,
    name: 'references_checked_per_statement',
    sql: `
-- PostgreSQL checks the store and merchant references of an import's rows once per statement
-- instead of once per row; SQLite's foreign keys are checked in the writing process, per row, at
-- a cost the import's measurements do not single out. Kept so that both engines number their
-- migrations alike.
SELECT 1;
`,
  },
  {
    id: 52,
    name: 'outbox_waiting_index_counts_products',
    sql: `
-- /metrics' outbox depth sums product_count over the first CPS_METRICS_COUNT_MAX outbox rows. The
-- column sits after product_ids (migration 47) in each row, so reading it from the table walked
-- the overflow pages of every row's product ids (a row of a 1,000-product chunk is ~8 KB: 3,600
-- such rows cost a scrape 11 ms). The waiting index (migration 19) carries it too: the sum is read
-- from the index alone (0.6 ms), and the outbox keeps the same number of B-trees.
DROP INDEX webhook_outbox_waiting;
CREATE INDEX webhook_outbox_waiting ON webhook_outbox(endpoint_id, created_at, product_count);
`,
  },
  {
    id: 54,
    name: 'import_chunks_uncompressed_links_keyed',
    sql: `
-- PostgreSQL stores an import's staged chunks uncompressed (it compressed each when staged);
-- SQLite never compresses a value. PostgreSQL keeps a key of each product's links, so a bulk write
-- whose new sources keep their links sends none; SQLite compares the links it reads in the
-- writing process, and leaves the column null (unknown).
ALTER TABLE products ADD COLUMN links_key TEXT;
`,
  },
  {
    id: 55,
    name: 'payloads_and_sources_half_pages',
    sql: `
-- PostgreSQL leaves half of each new page of sources and published payloads free, so that a row's
-- next version is written in place; SQLite has no such setting. Kept so that both engines number
-- their migrations alike.
SELECT 1;
`,
  },
  {
    id: 56,
    name: 'feed_window_from_its_index',
    sql: `
-- PostgreSQL's feed index carries the product and the kind of change (INCLUDE), so that a window
-- is read from the index alone; SQLite's rows are found by their rowid (the change's id), in the
-- writing process's cache. Kept so that both engines number their migrations alike.
SELECT 1;
`,
  },
  {
    id: 57,
    name: 'feed_window_in_index_order',
    sql: `
-- PostgreSQL reads a feed window through a function that keeps its planner to the feed index's
-- order whatever the statistics say; SQLite's plan for the window searches changes_feed already
-- (the bounded-statement tests say so). Kept so that both engines number their migrations alike.
SELECT 1;
`,
  },
  {
    id: 58,
    name: 'opaque_delivery_ids_and_full_payloads',
    sql: `
-- A delivery's webhook-id was dlv_ and its row id: a receiver learnt how many deliveries the whole
-- deployment had made. New deliveries get dlv_ and 32 random hex digits (storage/delivery-ids.ts).
-- A delivery a receiver may have seen keeps the id it was sent with, so its retries and a resend's
-- X-Service-Replaces still name it; one never attempted gets a random one.
ALTER TABLE webhook_deliveries ADD COLUMN webhook_id TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN replaces_webhook_id TEXT;
UPDATE webhook_deliveries SET webhook_id = CASE WHEN attempts > 0 OR occurred_at IS NOT NULL THEN 'dlv_' || id
  ELSE 'dlv_' || lower(hex(randomblob(16))) END;
UPDATE webhook_deliveries SET replaces_webhook_id = (SELECT r.webhook_id FROM webhook_deliveries AS r WHERE r.id = webhook_deliveries.replaces)
  WHERE replaces IS NOT NULL;
CREATE UNIQUE INDEX webhook_deliveries_webhook_id ON webhook_deliveries(webhook_id);
-- What an endpoint's deliveries carry: the spec's payload alone (thin), or also the changed products (full).
ALTER TABLE webhook_endpoints ADD COLUMN payload TEXT NOT NULL DEFAULT 'thin' CHECK (payload IN ('thin', 'full'));
`,
  },
  {
    id: 61,
    name: 'api_key_allowed_origins',
    sql: `
-- The web origins whose browser pages may read the public API with the key (CORS), as a JSON array;
-- NULL for none, so that a preflight, which cannot know the key, reads only the keys that have some.
ALTER TABLE api_keys ADD COLUMN allowed_origins TEXT;
CREATE INDEX api_keys_with_origins ON api_keys(id) WHERE allowed_origins IS NOT NULL;
`,
  },
];
