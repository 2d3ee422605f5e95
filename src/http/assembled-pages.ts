// A product page or `?ids=` list answered from the read cache (catalog/read-cache.ts) is the same
// stored bytes object on every read: its assembled body and ETag digest are kept with it, one per
// envelope (store and meta), so such a read copies and hashes nothing of its ~155 KB again (the
// copy, the hash and the garbage they made cost ~50 µs of a ~250 µs page). They live exactly as
// long as the stored bytes (a WeakMap keyed by them), so within the read cache's budget, which
// counts each entry's bytes twice for this.
import type { components } from '../generated/public-api.js';
import { JsonItems, jsonObject, type JsonBytes } from '../shared/json-bytes.js';
import { etagDigest } from './conditional.js';

type ProductPage = components['schemas']['ProductPage'];
type Envelope = Omit<ProductPage, 'data'>;

export interface AssembledPage {
  body: JsonBytes<ProductPage>;
  /** etagDigest of the rows' stored hashes and the envelope. */
  digest: string;
}

const assembled = new WeakMap<Uint8Array, AssembledPage & { envelope: string }>();

/**
 * The page `{data, store, meta}` of stored payloads and the ETag digest over their stored hashes
 * (`digests`) and the envelope, which change whenever the bytes do. `kept`: the read cache holds
 * `data` (it will come back); bytes read for one request only are not remembered.
 */
export function assembledPage(data: Uint8Array, digests: Uint8Array, envelope: Envelope, kept: boolean): AssembledPage {
  const envelopeJson = JSON.stringify(envelope);
  const known = kept ? assembled.get(data) : undefined;
  if (known?.envelope === envelopeJson) return known;
  const page = {
    envelope: envelopeJson,
    body: jsonObject<ProductPage>({ data: new JsonItems<ProductPage['data'][number]>(data), ...envelope }),
    digest: etagDigest(Buffer.concat([digests, Buffer.from(envelopeJson)])),
  };
  if (kept) assembled.set(data, page);
  return page;
}
