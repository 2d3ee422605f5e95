// What the storage tests write again and again: the engine's name for test titles, a default
// store `de` and an empty product source (content in German only).
import type { ProductSourceDocument, StoreInputRecord } from '../../src/catalog/model.js';
import { onPglite, TEST_ENGINE } from './engine.js';

export const ENGINE = TEST_ENGINE === 'sqlite' ? 'SQLite' : onPglite() ? 'PostgreSQL (embedded pglite)' : 'PostgreSQL';

export const STORE: StoreInputRecord = {
  name: 'Deutschland',
  locale: 'de-DE',
  currency: 'EUR',
  is_default: true,
  active: true,
  exclude_out_of_stock: false,
};

export const SOURCE: ProductSourceDocument = {
  eans: [],
  manufacturer: null,
  content: { de: { title: 'Zelt', description: null } },
  images: [],
  offers: [],
  own_stock: null,
  supplier_attributes: [],
  overrides: {},
  excluded_stores: [],
};
