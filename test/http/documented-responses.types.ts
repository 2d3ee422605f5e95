// Compile-time checks (run by `tsc --noEmit`, part of `npm test`): a handler registered through
// documentedRoutes can only answer what its route documents, and a page assembled by jsonPage only
// splices parts of the generated schema type's fields.
import { OpenAPIHono } from '@hono/zod-openapi';
import type { components } from '../../src/generated/public-api.js';
import { routes } from '../../src/generated/public-routes.js';
import { routes as operationsRoutes } from '../../src/generated/operations-routes.js';
import { conditionalJsonPage, documentedRoutes, jsonPage } from '../../src/http/documented-responses.js';
import { JsonItems } from '../../src/shared/json-bytes.js';

type Schemas = components['schemas'];
const route = documentedRoutes(new OpenAPIHono());
const products = new JsonItems<Schemas['Product']>(new Uint8Array());
const prices = new JsonItems<Schemas['ProductPrices']>(new Uint8Array());
const meta: Schemas['PaginationMeta'] = { current_page: 1, per_page: 50, last_page: 1, total: 0 };

// What the document allows compiles.
route(routes.listPrices, (c) => jsonPage<Schemas['PriceList']>(c, { data: prices, store: 'main' }));
route(routes.listProducts, (c) => conditionalJsonPage<Schemas['ProductPage']>(c, { data: products, store: 'main', meta }));
route(routes.listProducts, (c) => c.body(null, 304));
route(operationsRoutes.getHealth, (c) => c.json({ status: 'ok' as const }, 200));
route(operationsRoutes.getMetrics, (c) => c.text('# metrics', 200));

// @ts-expect-error a list of stores is not the PriceList listPrices documents
route(routes.listPrices, (c) => jsonPage<Schemas['StoreList']>(c, { data: [] }));
// @ts-expect-error listPrices documents no 304
route(routes.listPrices, (c) => c.body(null, 304));
// @ts-expect-error a plain Response is not a documented answer, though listProducts documents a bodiless 304
route(routes.listProducts, () => new Response('{}'));
route(
  routes.listProducts,
  // @ts-expect-error 201 is not a status listProducts documents
  (c) => conditionalJsonPage<Schemas['ProductPage']>(c, { data: products, store: 'main', meta }) && c.json({}, 201),
);
// @ts-expect-error changes spliced where the products go (price entries are sparse products now: fields=sku,ean,prices)
jsonPage<Schemas['ProductPage']>(null!, { data: new JsonItems<Schemas['ChangeEntry']>(new Uint8Array()), store: 'main', meta });
// @ts-expect-error the meta field is missing
jsonPage<Schemas['ProductPage']>(null!, { data: products, store: 'main' });
// @ts-expect-error the store is a slug, not a number
jsonPage<Schemas['PriceList']>(null!, { data: prices, store: 1 });
// @ts-expect-error getMetrics answers text, not a number
route(operationsRoutes.getMetrics, (c) => c.json(1, 200));
// @ts-expect-error getHealth answers {"status":"ok"} only
route(operationsRoutes.getHealth, (c) => c.json({ status: 'fine' }, 200));
