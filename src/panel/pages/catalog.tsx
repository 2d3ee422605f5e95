// A merchant's catalog (docs/panel.md#pages, "Catalog"): pick a store; find a product by its id, ref, SKU or
// EAN (exact match) and see its payload exactly as integrators get it (GET /v1/products/{id}) beside
// its sources, the supplier chosen and the pricing rule each price comes from (per store, as the
// domain's resolution explains them) and whether it is excluded; or page through
// the store's products by id, optionally the excluded ones only, with their reasons.
import { Hono } from 'hono';
import type { Service } from '../../service.js';
import type { PanelAccounts, PanelSession } from '../../admin/accounts.js';
import type { ProductSourceView } from '../../catalog/product-sources.js';
import type { Product } from '../../catalog/model.js';
import type { IgnoredOfferReason, ResolutionExplanation } from '../../catalog/resolve.js';
import { SEARCH_MATCHES_MAX, type ProductSearch, type ProductSearchField, type ProductSummaryPage } from '../../catalog/reads.js';
import { invalidInput, ProblemError } from '../../shared/problem.js';
import type { PricingRuleRecord, StoreRecord } from '../../catalog/model.js';
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
  /** Per store of the merchant: the chosen supplier and the applied pricing rules. */
  explanations: ResolutionExplanation[];
  /** The stored payload's text; undefined when the product is not in the store's catalog. */
  payload?: string;
  missing?: string;
}

function ruleSummary(rule: PricingRuleRecord): string {
  const ending = rule.price_ending === null ? '' : `, ending ${rule.price_ending}`;
  return `rule ${rule.id}${rule.is_catch_all ? ' (catch-all)' : ` (priority ${rule.priority})`}: +${rule.markup_percent}% +${rule.markup_amount}${ending}`;
}

const WHY_CHOSEN: Record<NonNullable<ResolutionExplanation['chosenSupplier']>['why'], string> = {
  in_stock: 'the lowest cost among the offers in stock',
  none_in_stock: 'no offer is in stock: the lowest cost of all',
};
const WHY_IGNORED: Record<IgnoredOfferReason, string> = {
  unknown_supplier: 'the supplier is not registered',
  no_exchange_rate: 'no exchange rate to the store currency',
};
const BASE_COST_FROM: Record<ResolutionExplanation['baseCost']['from'], string> = {
  chosen_offer: "the chosen supplier's cost",
  own_stock: "own stock's cost",
  none: 'nothing to cost it from',
};

function chosenSupplierText(why: ResolutionExplanation): string {
  const chosen = why.chosenSupplier;
  if (!chosen) return 'none: no offer is usable in this store';
  return `${chosen.supplierName} (${chosen.supplierRef}): ${chosen.quantity} at ${chosen.cost} ${why.store.currency}`;
}

/** The store's resolution as the domain explains it: the chosen supplier and the rule behind each price. */
function Resolution(props: { payload: string; why: ResolutionExplanation }) {
  const product = JSON.parse(props.payload) as Product;
  const { why } = props;
  const currency = why.store.currency;
  return (
    <dl class="facts" aria-label={`Resolution in store ${why.store.slug}`}>
      <dt>Excluded</dt>
      <dd>{product.excluded ? `yes: ${product.exclusion_reason}` : 'no'}</dd>
      <dt>Chosen supplier</dt>
      <dd id="chosen-supplier">
        {chosenSupplierText(why)}
        {why.chosenSupplier && <span class="muted"> — {WHY_CHOSEN[why.chosenSupplier.why]}</span>}
        {why.rankedOffers.length > 1 && (
          <ol aria-label="Offers ranked">
            {why.rankedOffers.map((o) => (
              <li>
                {o.supplierRef}: {o.quantity} at {o.cost} {currency}
              </li>
            ))}
          </ol>
        )}
        {why.ignoredOffers.length > 0 && (
          <ul aria-label="Offers ignored">
            {why.ignoredOffers.map((o) => (
              <li>
                {o.supplierRef}: ignored, {WHY_IGNORED[o.reason]}
              </li>
            ))}
          </ul>
        )}
      </dd>
      <dt>Base cost</dt>
      <dd>
        {why.baseCost.amount} {currency} <span class="muted">({BASE_COST_FROM[why.baseCost.from]})</span>
      </dd>
      <dt>Stock</dt>
      <dd>
        {product.stock}{' '}
        <span class="muted">
          (own {why.stock.own} + chosen supplier {why.stock.supplier})
        </span>
      </dd>
      <dt>Applied pricing rules</dt>
      <dd>
        {why.prices.length === 0 ? (
          'no prices'
        ) : (
          <ul id="applied-rules">
            {why.prices.map((p) => (
              <li>
                {p.customerGroup}: {ruleSummary(p.rule)} → {p.computedPrice} {currency}
              </li>
            ))}
          </ul>
        )}
      </dd>
    </dl>
  );
}

/** The same product in each store: which supplier and which rules each one's payload comes from. */
function ResolutionPerStore(props: { merchantId: number; ref: string; explanations: ResolutionExplanation[] }) {
  return (
    <section aria-labelledby="per-store">
      <h2 id="per-store">Chosen supplier and pricing rules per store</h2>
      <table aria-label="Resolution per store" class="labelled">
        <thead>
          <tr>
            <th>Store</th>
            <th>Chosen supplier</th>
            <th>Base cost</th>
            <th>Stock</th>
            <th>Pricing rules</th>
          </tr>
        </thead>
        <tbody>
          {props.explanations.map((why) => (
            <tr data-store={why.store.slug}>
              <td data-label="Store">
                {why.store.active ? (
                  <a href={catalogUrl(props.merchantId, { store: why.store.slug, q: props.ref })}>
                    {why.store.name} ({why.store.slug})
                  </a>
                ) : (
                  <>
                    {why.store.name} ({why.store.slug}) <span class="muted">inactive</span>
                  </>
                )}
              </td>
              <td data-label="Chosen supplier">
                {why.chosenSupplier ? `${why.chosenSupplier.supplierRef} at ${why.chosenSupplier.cost} ${why.store.currency}` : 'none'}
              </td>
              <td data-label="Base cost">
                {why.baseCost.amount} {why.store.currency}
              </td>
              <td data-label="Stock">
                {why.stock.sellable}
                {why.exclusionReason ? ` (excluded: ${why.exclusionReason})` : ''}
              </td>
              <td data-label="Pricing rules">
                {why.prices.map((p) => `${p.customerGroup}: rule ${p.rule.id}${p.rule.is_catch_all ? ' (catch-all)' : ''}`).join('; ')}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function Sources(props: { source: ProductSourceView }) {
  const s = props.source;
  const overrides = Object.entries(s.overrides);
  return (
    <section aria-labelledby="sources">
      <h2 id="sources">Sources</h2>
      <h3>Offers</h3>
      {s.offers.length === 0 ? (
        <p>No supplier offers.</p>
      ) : (
        <table aria-label="Offers">
          <thead>
            <tr>
              <th>Supplier</th>
              <th>Quantity</th>
              <th>Cost</th>
            </tr>
          </thead>
          <tbody>
            {s.offers.map((o) => (
              <tr>
                <td>{o.supplier_ref}</td>
                <td>{o.quantity}</td>
                <td>
                  {o.cost} {o.currency}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Own stock</h3>
      <p>
        {s.own_stock
          ? `${s.own_stock.quantity}${s.own_stock.cost === null ? '' : ` at ${s.own_stock.cost} ${s.own_stock.currency}`}`
          : 'None held.'}
      </p>
      <h3>Overrides</h3>
      {overrides.length === 0 ? (
        <p>None.</p>
      ) : (
        <table aria-label="Overrides">
          <thead>
            <tr>
              <th>Attribute</th>
              <th>Value</th>
            </tr>
          </thead>
          <tbody>
            {overrides.map(([key, value]) => (
              <tr>
                <td>{key}</td>
                <td>{value}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Excluded from stores</h3>
      <p>{s.excluded_stores.length === 0 ? 'None.' : s.excluded_stores.join(', ')}</p>
      <h3>Images</h3>
      {s.images.length === 0 ? (
        <p>None.</p>
      ) : (
        <ul>
          {s.images.map((i) => (
            <li class="wrap">
              {i.url} <span class="muted">({i.state})</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** Products per page of the store's product list (the public API's default per_page). */
export const PRODUCTS_PER_PAGE = 50;

const FIELD_NAMES: Record<ProductSearchField, string> = { id: 'id', ref: 'ref', sku: 'SKU', ean: 'EAN' };

function catalogUrl(merchantId: number, params: Record<string, string | undefined>): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) query.set(key, value);
  return `/panel/merchants/${merchantId}/catalog?${query}`;
}

function exclusionText(p: { excluded: boolean; exclusion_reason: string | null }): string {
  return p.excluded ? `excluded: ${p.exclusion_reason}` : 'no';
}

/** Several products share the SKU or EAN searched for: links to each one's detail. */
function Matches(props: { merchantId: number; store: string; query: string; search: ProductSearch }) {
  const { search } = props;
  const field = FIELD_NAMES[search.field!];
  return (
    <section aria-labelledby="matches">
      <h2 id="matches">
        {search.matches.length} products have the {field} "{props.query}"
      </h2>
      {search.matches.length >= SEARCH_MATCHES_MAX && <p class="muted">Only the first {search.matches.length} by id are listed.</p>}
      <ul aria-label="Matching products">
        {search.matches.map((m) => (
          <li>
            <a href={catalogUrl(props.merchantId, { store: props.store, q: String(m.id) })}>Product {m.id}</a>{' '}
            <span class="muted">ref {m.ref}</span>
            {m.summary?.title ? ` · ${m.summary.title}` : ''}
            {m.summary?.excluded ? ` · ${exclusionText(m.summary)}` : ''}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** The store's products by id, 50 a page, optionally the excluded ones only. */
function ProductList(props: { merchantId: number; list: ProductSummaryPage; excludedOnly: boolean; afterId: number | undefined }) {
  const { merchantId, list, excludedOnly } = props;
  const store = list.store.slug;
  const excludedTotal = Object.values(list.counts.excluded).reduce((a, b) => a + b, 0);
  const reasons = Object.entries(list.counts.excluded)
    .filter(([, n]) => n > 0)
    .map(([reason, n]) => `${reason} ${n}`)
    .join(', ');
  return (
    <section aria-labelledby="products">
      <h2 id="products">
        {excludedOnly ? 'Excluded products' : 'Products'} in store {store}
      </h2>
      <p id="published-counts">
        {list.counts.total} published, the excluded ones included: {list.counts.total - excludedTotal} in the store's export,{' '}
        {excludedTotal} excluded from it{reasons ? ` (${reasons})` : ''}.
      </p>
      <form class="inline" method="get" action={`/panel/merchants/${merchantId}/catalog`}>
        <input type="hidden" name="store" value={store} />
        <label class="inline-check">
          <input type="checkbox" name="excluded" value="1" checked={excludedOnly} /> Excluded only
        </label>{' '}
        <button type="submit">Filter</button>
      </form>
      {list.products.length === 0 ? (
        <p>
          {excludedOnly ? (
            'No excluded products.'
          ) : (
            <>
              No products in this store yet: add them on the <a href={`/panel/merchants/${merchantId}/import`}>Import</a> page.
            </>
          )}
        </p>
      ) : (
        <table aria-label="Products" class="labelled">
          <thead>
            <tr>
              <th>Id</th>
              <th>Title</th>
              <th>SKU</th>
              <th>EAN</th>
              <th>Excluded</th>
            </tr>
          </thead>
          <tbody>
            {list.products.map((p) => (
              <tr>
                <td data-label="Id">
                  <a href={catalogUrl(merchantId, { store, q: String(p.id) })}>{p.id}</a>
                </td>
                <td data-label="Title">{p.title ?? <span class="muted">none</span>}</td>
                <td data-label="SKU">{p.sku ?? ''}</td>
                <td data-label="EAN">{p.ean ?? ''}</td>
                <td data-label="Excluded">{p.excluded ? p.exclusion_reason : 'no'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <nav aria-label="Pages">
        {props.afterId !== undefined && (
          <a href={catalogUrl(merchantId, { store, excluded: excludedOnly ? '1' : undefined })}>First page</a>
        )}
        {props.afterId !== undefined && list.nextAfterId !== null && ' · '}
        {list.nextAfterId !== null && (
          <a
            rel="next"
            href={catalogUrl(merchantId, { store, excluded: excludedOnly ? '1' : undefined, after_id: String(list.nextAfterId) })}
          >
            Next {PRODUCTS_PER_PAGE} products
          </a>
        )}
      </nav>
    </section>
  );
}

function CatalogPage(props: {
  session: PanelSession;
  merchantId: number;
  stores: StoreRecord[];
  store: string;
  query: string;
  found?: Found | undefined;
  foundBy?: ProductSearchField | undefined;
  search?: ProductSearch | undefined;
  list?: { page: ProductSummaryPage; excludedOnly: boolean; afterId: number | undefined } | undefined;
  error?: { detail: string } | undefined;
}) {
  const { session, merchantId, found } = props;
  return (
    <Layout title="Catalog" session={session} merchantId={merchantId}>
      {props.stores.length === 0 ? (
        <p>
          No active stores yet: the operator creates them (the command line's <code>stores set</code>, or the admin API).
        </p>
      ) : (
        <form class="stacked" method="get" action={`/panel/merchants/${merchantId}/catalog`} role="search">
          <label>
            Store
            <select name="store">
              {props.stores.map((s) => (
                <option value={s.slug} selected={s.slug === props.store}>
                  {s.name} ({s.slug})
                </option>
              ))}
            </select>
          </label>
          <label>
            Product id, ref, SKU or EAN
            <input name="q" required value={props.query} />
          </label>
          <button type="submit">Find</button>
        </form>
      )}
      <p class="muted">
        Exact match, tried as the product's id, then its ref, then the SKU and then the EAN its payload has in the store.
        {props.query && (
          <>
            {' '}
            <a href={catalogUrl(merchantId, { store: props.store })}>All products of the store</a>
          </>
        )}
      </p>
      <ErrorMessage error={props.error} />
      {props.search && props.search.matches.length > 1 && (
        <Matches merchantId={merchantId} store={props.store} query={props.query} search={props.search} />
      )}
      {props.list && (
        <ProductList merchantId={merchantId} list={props.list.page} excludedOnly={props.list.excludedOnly} afterId={props.list.afterId} />
      )}
      {found && (
        <>
          <h2>
            Product {found.source.id} <span class="muted">ref {found.source.ref}</span>
          </h2>
          {props.foundBy && props.foundBy !== 'id' && props.foundBy !== 'ref' && (
            <p class="muted">Found by its {FIELD_NAMES[props.foundBy]}.</p>
          )}
          <div class="side-by-side">
            <section aria-labelledby="payload">
              <h2 id="payload">Payload in store {props.store}</h2>
              {found.payload === undefined ? (
                <p class="error">{found.missing}</p>
              ) : (
                <>
                  <p class="muted">
                    As{' '}
                    <code>
                      GET /v1/products/{found.source.id}?store={props.store}
                    </code>{' '}
                    returns it.
                  </p>
                  <pre class="payload" aria-label="Payload">
                    {indentJson(found.payload)}
                  </pre>
                  {found.explanations
                    .filter((why) => why.store.slug === props.store)
                    .map((why) => (
                      <Resolution payload={found.payload!} why={why} />
                    ))}
                </>
              )}
            </section>
            <Sources source={found.source} />
          </div>
          <ResolutionPerStore merchantId={merchantId} ref={found.source.ref} explanations={found.explanations} />
        </>
      )}
    </Layout>
  );
}

/** The list's `after_id`: absent, or a non-negative integer (400 otherwise, as in the public API). */
function afterIdParam(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!/^[0-9]{1,15}$/.test(raw))
    throw invalidInput('query', [{ name: 'after_id', in: 'query', reason: 'must be a non-negative integer' }]);
  return Number(raw);
}

export function catalogPages(service: Service, _accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const { admin, reads } = service;

  pages.get('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    await admin.merchant(merchantId);
    const stores = await reads.activeStores(merchantId);
    const store = stores.find((s) => s.slug === c.req.query('store')) ?? stores.find((s) => s.is_default) ?? stores[0];
    const query = (c.req.query('q') ?? '').trim();
    const page = { session, merchantId, stores, store: store?.slug ?? '', query };
    if (!store) return c.html(<CatalogPage {...page} />);
    if (!query) {
      const excludedOnly = c.req.query('excluded') === '1';
      const afterId = afterIdParam(c.req.query('after_id'));
      const list = await reads.productSummaries(merchantId, store.slug, { afterId, perPage: PRODUCTS_PER_PAGE, excludedOnly });
      return c.html(<CatalogPage {...page} list={{ page: list, excludedOnly, afterId }} />);
    }
    const search = await reads.findProducts(merchantId, store.slug, query);
    if (search.matches.length === 0) {
      return c.html(
        <CatalogPage
          {...page}
          error={{ detail: `No product has the id or ref "${query}", nor the SKU or EAN "${query}" in store ${store.slug}.` }}
        />,
        404,
      );
    }
    if (search.matches.length > 1) return c.html(<CatalogPage {...page} search={search} />);
    const product = search.matches[0]!;
    const [source, explanations] = await Promise.all([
      admin.productSource(merchantId, product.ref),
      admin.explainProduct(merchantId, product.ref),
    ]);
    let found: Found;
    try {
      found = { source, explanations, payload: new TextDecoder().decode(await reads.product(merchantId, store.slug, product.id)) };
    } catch (error) {
      if (!(error instanceof ProblemError && error.status === 404)) throw error;
      found = {
        source,
        explanations,
        missing: `Product ${product.id} is not published in store ${store.slug}: integrators get 404 for it.`,
      };
    }
    return c.html(<CatalogPage {...page} found={found} foundBy={search.field ?? undefined} />);
  });

  return pages;
}
