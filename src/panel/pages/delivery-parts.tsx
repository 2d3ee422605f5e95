// What the delivery log and a delivery's page show of a delivery: its store by slug,
// its products as links to the catalog page, whether it is a test or a resend (and what a resend
// replaces), and the request an attempt sent, as the receiver got it.
import type { components } from '../../generated/admin-api.js';
import type { StoreRecord } from '../../catalog/model.js';

type Schemas = components['schemas'];
type Delivery = Schemas['Delivery'];
type Attempt = Schemas['Attempt'];

/** The stores of the merchant by id (a delivery names its store by id, as the payload does). */
export type StoresById = ReadonlyMap<number, Pick<StoreRecord, 'slug' | 'name'>>;

export const storesById = (stores: readonly StoreRecord[]): StoresById => new Map(stores.map((s) => [s.id, s]));

/** A delivery's store: its slug, "all stores" for a null store_id, the id of a store deleted since. */
export function StoreSlug(props: { storeId: number | null; stores: StoresById }) {
  if (props.storeId === null) return <span class="muted">all stores</span>;
  const store = props.stores.get(props.storeId);
  return store ? <span title={store.name}>{store.slug}</span> : <span class="muted">store {props.storeId} (deleted)</span>;
}

/** The catalog page of a product in the delivery's store (the default store for an all-stores delivery). */
export function catalogLink(merchantId: number, productId: number, storeSlug: string | undefined): string {
  const query = new URLSearchParams(storeSlug ? { store: storeSlug, q: String(productId) } : { q: String(productId) });
  return `/panel/merchants/${merchantId}/catalog?${query}`;
}

/** The product ids as links to the catalog page; at most `limit` of them, then how many there are. */
export function ProductLinks(props: {
  merchantId: number;
  delivery: Pick<Delivery, 'product_ids' | 'store_id'>;
  stores: StoresById;
  limit?: number;
}) {
  const { product_ids: ids, store_id: storeId } = props.delivery;
  const slug = storeId === null ? undefined : props.stores.get(storeId)?.slug;
  const shown = props.limit !== undefined && ids.length > props.limit ? ids.slice(0, props.limit) : ids;
  return (
    <span class="product-links">
      {shown.map((id, i) => (
        <>
          {i > 0 && ', '}
          <a href={catalogLink(props.merchantId, id, slug)}>{id}</a>
        </>
      ))}
      {shown.length < ids.length && ` … (${ids.length})`}
    </span>
  );
}

/** A test or a resend says so in the log: `test`, `resend of #12`, `re-sent as #13`. */
export function DeliveryKind(props: { base: string; delivery: Pick<Delivery, 'test' | 'replaces' | 'replaced_by'> }) {
  const { test, replaces, replaced_by: replacedBy } = props.delivery;
  return (
    <>
      {test && (
        <>
          {' '}
          <span class="tag tag-test">test</span>
        </>
      )}
      {replaces !== null && (
        <div class="muted">
          resend of <a href={`${props.base}/deliveries/${replaces}`}>#{replaces}</a>
        </div>
      )}
      {replacedBy !== null && (
        <div class="muted">
          re-sent as <a href={`${props.base}/deliveries/${replacedBy}`}>#{replacedBy}</a>
        </div>
      )}
    </>
  );
}

const retrying = (status: Delivery['status']) => status === 'pending' || status === 'failed';

/**
 * Whether the receiver gets a re-sent payload once or twice, in words, from the state the two
 * deliveries are in now: an original waiting for a retry was dropped when it was re-sent (one
 * delivery); one that had succeeded, or whose attempt in flight then succeeded, was delivered too.
 */
export function resendOutcome(original: Pick<Delivery, 'id' | 'status'>): string {
  if (original.status === 'succeeded')
    return `#${original.id} was delivered too: the receiver gets this payload twice (receivers deduplicate on event and product ids).`;
  if (retrying(original.status)) return `#${original.id} is still retrying: both will arrive.`;
  return `#${original.id} makes no further attempt: the receiver gets this payload from this delivery alone.`;
}

/** On a re-sent delivery's own page: what became of it. */
export function replacedOutcome(delivery: Pick<Delivery, 'status' | 'replaced_by'>): string {
  const by = `#${delivery.replaced_by}`;
  if (delivery.status === 'succeeded') return `Re-sent as ${by}; this one was delivered too, so the receiver gets the payload twice.`;
  if (retrying(delivery.status)) return `Re-sent as ${by}; this one still retries: both will arrive.`;
  return `Re-sent as ${by}: this one makes no further attempt.`;
}

/**
 * The headers the HTTP client (undici's `request`) adds to what the service sets, as it sends them:
 * the URL's host (the port only when not the scheme's default, as `URL.host` writes it), keep-alive,
 * and the body's length in bytes. They are not recorded with the attempt; the page labels them so.
 */
export function clientAddedHeaders(url: string, bodyBytes: number | null): [name: string, value: string][] {
  return [
    ['host', new URL(url).host],
    ['connection', 'keep-alive'],
    ...(bodyBytes === null ? [] : [['content-length', String(bodyBytes)] as [string, string]]),
  ];
}

/**
 * An attempt's request: the request line and the headers the service set, as recorded with the
 * attempt, then, labelled apart, those the HTTP client adds on its own (clientAddedHeaders). The
 * body follows it on the page.
 */
export function RequestAsSent(props: { attempt: Attempt; bodyBytes: number | null }) {
  const { request_url: url, request_headers: headers } = props.attempt;
  if (url === null || headers === null) return <span class="muted">not recorded</span>;
  const target = new URL(url);
  const recorded = [
    `POST ${target.pathname}${target.search} HTTP/1.1`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  return (
    <>
      <pre class="request">{recorded.join('\n')}</pre>
      <p class="muted client-headers">
        Added by the HTTP client, not recorded:{' '}
        {clientAddedHeaders(url, props.bodyBytes).map(([name, value], i) => (
          <>
            {i > 0 && ', '}
            <code>{`${name}: ${value}`}</code>
          </>
        ))}
      </p>
    </>
  );
}
