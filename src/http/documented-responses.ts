// Handlers typed by the document: every answer a handler returns is one of its route's documented
// responses (status, and for JSON the generated schema type), which @hono/zod-openapi alone does
// not check once a route documents a bodiless response (304, 204): it then accepts any Response.
import type { OpenAPIHono, RouteConfig, RouteConfigToTypedResponse, RouteHandler, RouteHook } from '@hono/zod-openapi';
import type { Context, Env, TypedResponse } from 'hono';
import type { StatusCode } from 'hono/utils/http-status';
import { jsonObject, type JsonBytes, type JsonParts } from '../shared/json-bytes.js';
import { conditionalJson } from './conditional.js';

type Responses<R extends RouteConfig> = R['responses'];
type BodilessStatus<R extends RouteConfig> = {
  [S in keyof Responses<R>]: Responses<R>[S] extends { content: object } ? never : S;
}[keyof Responses<R>] &
  StatusCode;

/**
 * The answers a route documents: its JSON and text responses as @hono/zod-openapi types them
 * (from the generated zod schemas), and each bodiless status as a response without a body.
 */
export type DocumentedResponse<R extends RouteConfig> =
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- {} is "any body" here: the Exclude drops every response of a bodiless status, whatever its body type
  Exclude<RouteConfigToTypedResponse<R>, TypedResponse<{}, BodilessStatus<R>, string>> | TypedResponse<null, BodilessStatus<R>, 'body'>;

type MaybePromise<T> = T | Promise<T>;

/** A route handler whose every return is a documented response of the route. */
export type DocumentedHandler<R extends RouteConfig, E extends Env> = (
  c: Parameters<RouteHandler<R, E>>[0],
) => MaybePromise<DocumentedResponse<R>>;

/**
 * `app.openapi` with the answers checked against the document.
 *
 * @example
 * const route = documentedRoutes(app);
 * route(routes.getHealth, (c) => c.json({ status: 'ok' as const }, 200));
 */
export function documentedRoutes<E extends Env>(app: OpenAPIHono<E>) {
  return <R extends RouteConfig>(config: R, handler: DocumentedHandler<R, E>, hook?: RouteHook<R, E>): void => {
    // A documented response is one of those app.openapi accepts for R; TypeScript cannot prove it
    // for a generic R, so the handler (already checked at each call, R known) is passed as one.
    app.openapi(config, handler as Parameters<typeof app.openapi<R>>[1], hook as Parameters<typeof app.openapi<R>>[2]);
  };
}

/** A JSON 200 of the schema type T, assembled from typed parts (stored bytes and values). */
export function jsonPage<T extends object>(c: Context, parts: JsonParts<T>): Response & TypedResponse<T, 200, 'json'> {
  const response: Response = c.body(jsonObject<T>(parts), 200, { 'Content-Type': 'application/json' });
  return response as Response & TypedResponse<T, 200, 'json'>;
}

/**
 * A JSON 200 of the schema type T with its ETag, or a bodiless 304 when If-None-Match names it
 * (conditional.ts). `identity`, by default the bytes, must change whenever the bytes do.
 */
export function conditionalJsonPage<T extends object>(
  c: Context,
  parts: JsonParts<T>,
  identity?: Uint8Array,
): Response & (TypedResponse<T, 200, 'json'> | TypedResponse<null, 304, 'body'>) {
  const bytes = jsonObject<T>(parts);
  return conditionalJsonBytes<T>(c, bytes, identity ?? bytes);
}

/** conditionalJsonPage of bytes already assembled, and of the etagDigest of their identity when it is known. */
export function conditionalJsonBytes<T extends object>(
  c: Context,
  bytes: JsonBytes<T>,
  identity: Uint8Array | { digest: string },
): Response & (TypedResponse<T, 200, 'json'> | TypedResponse<null, 304, 'body'>) {
  return conditionalJson(c, bytes, identity) as Response & (TypedResponse<T, 200, 'json'> | TypedResponse<null, 304, 'body'>);
}
