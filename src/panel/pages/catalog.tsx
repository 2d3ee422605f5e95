// A merchant's catalog (issue 11, "Catalog"; this slice: one product at a time): pick a store,
// find a product by its id or ref (exact match), and see its payload exactly as integrators get it
// (GET /v1/products/{id}) beside its sources, the pricing rule each price comes from and whether
// it is excluded. Not yet: search by SKU or EAN, the product list, the excluded-products listing.
import { Hono } from 'hono';
import type { Service } from '../../service.js';
import type { PanelAccounts, PanelSession } from '../../admin/accounts.js';
import type { ProductSourceView } from '../../admin/catalog-admin.js';
import type { Product } from '../../catalog/model.js';
import { ProblemError } from '../../shared/problem.js';
import type { PricingRuleRecord, StoreRecord } from '../../storage/records.js';
import { merchantOf, sessionOf } from '../handlers.js';
import { ErrorMessage, Layout } from '../layout.js';
import type { PanelEnv } from '../session.js';

/**
 * Indents a JSON text without parsing it again, so every token stays as stored: prices keep their
 * trailing zeros (`54.20`), which JSON.parse + JSON.stringify would drop.
 */
export function indentJson(text: string, indent = '  '): string {
  let out = '';
  let depth = 0;
  let inString = false;
  const newline = () => `\n${indent.repeat(depth)}`;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (inString) {
      out += ch;
      if (ch === '\\') out += text[++i] ?? '';
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') {
      inString = true;
      out += ch;
    } else if (ch === '{' || ch === '[') {
      const close = ch === '{' ? '}' : ']';
      if (text[i + 1] === close) {
        out += ch + close;
        i++;
      } else {
        depth++;
        out += ch + newline();
      }
    } else if (ch === '}' || ch === ']') {
      depth--;
      out += newline() + ch;
    } else if (ch === ',') {
      out += ch + newline();
    } else if (ch === ':') {
      out += ': ';
    } else if (!/\s/.test(ch)) {
      out += ch;
    }
  }
  return out;
}

interface Found {
  source: ProductSourceView;
  /** The stored payload's text; undefined when the product is not in the store's catalog. */
  payload?: string;
  missing?: string;
}

function ruleSummary(rule: PricingRuleRecord | undefined, id: number): string {
  if (!rule) return `rule ${id}`;
  const ending = rule.price_ending === null ? '' : `, ending ${rule.price_ending}`;
  return `rule ${rule.id}${rule.is_catch_all ? ' (catch-all)' : ` (priority ${rule.priority})`}: +${rule.markup_percent}% +${rule.markup_amount}${ending}`;
}

function Resolution(props: { payload: string; rules: PricingRuleRecord[] }) {
  const product = JSON.parse(props.payload) as Product;
  return (
    <dl class="facts">
      <dt>Excluded</dt>
      <dd>{product.excluded ? `yes: ${product.exclusion_reason}` : 'no'}</dd>
      <dt>Stock</dt>
      <dd>{product.stock}</dd>
      <dt>Applied pricing rules</dt>
      <dd>
        {product.prices.length === 0 ? 'no prices' : (
          <ul>
            {product.prices.map((p) => (
              <li>{p.customer_group}: {ruleSummary(props.rules.find((r) => r.id === p.applied_rule_id), p.applied_rule_id)}</li>
            ))}
          </ul>
        )}
      </dd>
    </dl>
  );
}

function Sources(props: { source: ProductSourceView }) {
  const s = props.source;
  const overrides = Object.entries(s.overrides);
  return (
    <section aria-labelledby="sources">
      <h2 id="sources">Sources</h2>
      <h3>Offers</h3>
      {s.offers.length === 0 ? <p>No supplier offers.</p> : (
        <table aria-label="Offers">
          <thead><tr><th>Supplier</th><th>Quantity</th><th>Cost</th></tr></thead>
          <tbody>{s.offers.map((o) => <tr><td>{o.supplier_ref}</td><td>{o.quantity}</td><td>{o.cost} {o.currency}</td></tr>)}</tbody>
        </table>
      )}
      <h3>Own stock</h3>
      <p>{s.own_stock ? `${s.own_stock.quantity}${s.own_stock.cost === null ? '' : ` at ${s.own_stock.cost} ${s.own_stock.currency}`}` : 'None held.'}</p>
      <h3>Overrides</h3>
      {overrides.length === 0 ? <p>None.</p> : (
        <table aria-label="Overrides">
          <thead><tr><th>Attribute</th><th>Value</th></tr></thead>
          <tbody>{overrides.map(([key, value]) => <tr><td>{key}</td><td>{value}</td></tr>)}</tbody>
        </table>
      )}
      <h3>Excluded from stores</h3>
      <p>{s.excluded_stores.length === 0 ? 'None.' : s.excluded_stores.join(', ')}</p>
      <h3>Images</h3>
      {s.images.length === 0 ? <p>None.</p> : (
        <ul>{s.images.map((i) => <li class="wrap">{i.url} <span class="muted">({i.state})</span></li>)}</ul>
      )}
    </section>
  );
}

function CatalogPage(props: {
  session: PanelSession; merchantId: number; stores: StoreRecord[]; store: string; query: string;
  found?: Found | undefined; rules: PricingRuleRecord[]; error?: { detail: string } | undefined;
}) {
  const { session, merchantId, found } = props;
  return (
    <Layout title="Catalog" session={session} merchantId={merchantId}>
      {props.stores.length === 0 ? <p>No active stores yet.</p> : (
        <form class="stacked" method="get" action={`/panel/merchants/${merchantId}/catalog`} role="search">
          <label>Store
            <select name="store">
              {props.stores.map((s) => <option value={s.slug} selected={s.slug === props.store}>{s.name} ({s.slug})</option>)}
            </select>
          </label>
          <label>Product id or ref<input name="q" required value={props.query} /></label>
          <button type="submit">Find</button>
        </form>
      )}
      <p class="muted">Exact match on the product's id or ref. Search by SKU or EAN and the list of excluded products are not in the panel yet.</p>
      <ErrorMessage error={props.error} />
      {found && (
        <>
          <h2>Product {found.source.id} <span class="muted">ref {found.source.ref}</span></h2>
          <div class="side-by-side">
            <section aria-labelledby="payload">
              <h2 id="payload">Payload in store {props.store}</h2>
              {found.payload === undefined ? <p class="error">{found.missing}</p> : (
                <>
                  <p class="muted">As <code>GET /v1/products/{found.source.id}?store={props.store}</code> returns it.</p>
                  <pre class="payload" aria-label="Payload">{indentJson(found.payload)}</pre>
                  <Resolution payload={found.payload} rules={props.rules} />
                </>
              )}
            </section>
            <Sources source={found.source} />
          </div>
        </>
      )}
    </Layout>
  );
}

export function catalogPages(service: Service, _accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const { admin, reads } = service;

  /** The product an exact id or ref names: an all-digit query is tried as an id first, then as a ref. */
  async function productNamed(merchantId: number, query: string) {
    if (/^[0-9]{1,15}$/.test(query)) {
      try {
        return await admin.productById(merchantId, Number(query));
      } catch (error) {
        if (!(error instanceof ProblemError && error.status === 404)) throw error;
      }
    }
    return admin.product(merchantId, query);
  }

  pages.get('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    await admin.merchant(merchantId);
    const stores = await reads.activeStores(merchantId);
    const store = stores.find((s) => s.slug === c.req.query('store')) ?? stores.find((s) => s.is_default) ?? stores[0];
    const query = (c.req.query('q') ?? '').trim();
    const page = { session, merchantId, stores, store: store?.slug ?? '', query, rules: [] as PricingRuleRecord[] };
    if (!query || !store) return c.html(<CatalogPage {...page} />);
    let product;
    try {
      product = await productNamed(merchantId, query);
    } catch (error) {
      if (error instanceof ProblemError && error.status === 404) {
        return c.html(<CatalogPage {...page} error={{ detail: `No product has the id or ref "${query}".` }} />, 404);
      }
      throw error;
    }
    const [source, rules] = await Promise.all([admin.productSource(merchantId, product.ref), admin.listPricingRules(merchantId)]);
    let found: Found;
    try {
      found = { source, payload: new TextDecoder().decode(await reads.product(merchantId, store.slug, product.id)) };
    } catch (error) {
      if (!(error instanceof ProblemError && error.status === 404)) throw error;
      found = { source, missing: `Product ${product.id} is not published in store ${store.slug}: integrators get 404 for it.` };
    }
    return c.html(<CatalogPage {...page} rules={rules} found={found} />);
  });

  return pages;
}
