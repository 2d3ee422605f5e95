// Turns the operations of a bundled document into what the server needs to know of each request
// body before the validator reads it: its kind (by media type), whether it is required, and which
// configured size limit holds it. The server wires its body middleware from these facts
// (src/http/admin-api.ts) instead of reading the document at start-up.
import { deref, operations, type Json } from './openapi-refs.js';

/** The media types a request body may have, the kind the server reads it as, and the limit it is held to. */
const BODY_MEDIA_TYPES: Record<string, { body: 'json' | 'ndjson'; limit: 'adminBodyBytes' | 'importBodyBytes' }> = {
  'application/json': { body: 'json', limit: 'adminBodyBytes' },
  // A JSON merge patch (RFC 7396): JSON text, checked as any JSON body, then merged by its handler.
  'application/merge-patch+json': { body: 'json', limit: 'adminBodyBytes' },
  // A bulk import: read as a stream, a bounded piece at a time, under its own larger limit.
  'application/x-ndjson': { body: 'ndjson', limit: 'importBodyBytes' },
};

/** The scopes a merchant API key can carry (admin.yaml: ApiKeyScope); only these may be required. */
const KEY_SCOPES = ['catalog:read', 'catalog:write', 'webhooks:read', 'webhooks:write'];

export interface RouteFacts {
  operationId: string;
  scope: string | null;
  method: string;
  path: string;
  routerPath: string;
  body: 'json' | 'ndjson' | 'none';
  bodyRequired: boolean;
  bodyLimit: 'adminBodyBytes' | 'importBodyBytes' | null;
  mediaTypes: string[];
}

/** The facts of every operation of the document, path by path. */
export function routeFacts(doc: Json): RouteFacts[] {
  return operations(doc).map(({ path, method, operation }) => {
    const where = `${method.toUpperCase()} ${path} (${operation.operationId})`;
    if (typeof operation.operationId !== 'string') throw new Error(`${where}: needs an operationId`);
    const documents413 = Object.hasOwn(operation.responses ?? {}, '413');
    const facts = {
      operationId: operation.operationId,
      scope: keyScope(doc, operation, where),
      method: method.toUpperCase(),
      path,
      // Hono's syntax for the same template: `{name}` is `:name`.
      routerPath: path.replace(/\{([^}/]+)\}/g, ':$1'),
    };
    if (!operation.requestBody) {
      // A body sent to such an operation is never read, so it can never be too large.
      if (documents413) throw new Error(`${where}: documents 413 but takes no request body`);
      return { ...facts, body: 'none', bodyRequired: false, bodyLimit: null, mediaTypes: [] };
    }
    const requestBody = deref(doc, operation.requestBody);
    const mediaTypes = Object.keys(requestBody.content ?? {});
    const kinds = new Set(mediaTypes.map((type) => JSON.stringify(BODY_MEDIA_TYPES[type] ?? null)));
    if (mediaTypes.length === 0 || !mediaTypes.every((type) => BODY_MEDIA_TYPES[type]) || kinds.size !== 1) {
      throw new Error(
        `${where}: a request body needs media types of one kind among ${Object.keys(BODY_MEDIA_TYPES).join(', ')}, got ${mediaTypes.join(', ') || 'none'}`,
      );
    }
    if (!documents413) throw new Error(`${where}: takes a request body, so it must document 413 (the body's size limit)`);
    // A merge patch's media type is the contract (RFC 5789 section 2.2): another one is a 415, documented.
    if (mediaTypes.includes('application/merge-patch+json') && !Object.hasOwn(operation.responses ?? {}, '415')) {
      throw new Error(`${where}: takes a merge patch, so it must document 415 (a patch of another media type)`);
    }
    const { body, limit } = BODY_MEDIA_TYPES[mediaTypes[0]!]!;
    return { ...facts, body, bodyRequired: requestBody.required === true, bodyLimit: limit, mediaTypes };
  });
}

/**
 * The scope a merchant key needs for the operation, from its security requirements: the one
 * `MerchantKey` requirement's single scope, or null when the operation has none (the operator's alone).
 */
function keyScope(doc: Json, operation: Json, where: string): string | null {
  const requirements: Json[] = operation.security ?? doc.security ?? [];
  const keyRequirements = requirements.filter((requirement) => Object.hasOwn(requirement, 'MerchantKey'));
  if (keyRequirements.length === 0) return null;
  const [requirement] = keyRequirements;
  const scopes: unknown = keyRequirements.length === 1 ? requirement!.MerchantKey : undefined;
  if (!Array.isArray(scopes) || scopes.length !== 1 || !KEY_SCOPES.includes(scopes[0]) || Object.keys(requirement!).length !== 1) {
    throw new Error(`${where}: a MerchantKey requirement names exactly one scope of ${KEY_SCOPES.join(', ')}, alone`);
  }
  if (!requirements.some((requirement) => Object.hasOwn(requirement, 'AdminToken'))) {
    throw new Error(`${where}: the admin token must stay accepted beside MerchantKey`);
  }
  return scopes[0] as string;
}

const literal = (v: unknown) => JSON.stringify(v);

/** `src/generated/admin-route-facts.ts`: the body facts of every operation, one entry each. */
export function emitRouteFacts(doc: Json, options: { source: string; name: string }): string {
  const facts = routeFacts(doc);
  return [
    `// Generated by scripts/generate/generate.ts from ${options.source}: do not edit. Run \`npm run generate\`.`,
    '',
    '/** What the server needs to know of an operation before its handler: who may call it, and its request body. */',
    'export interface RouteFacts {',
    '  operationId: string;',
    "  /** The scope a merchant API key needs (its `MerchantKey` security requirement); null: the operator's alone (admin token). */",
    "  scope: 'catalog:read' | 'catalog:write' | 'webhooks:read' | 'webhooks:write' | null;",
    "  method: 'GET' | 'PUT' | 'POST' | 'DELETE' | 'PATCH' | 'HEAD' | 'OPTIONS';",
    "  /** The document's path template (`{name}` for a parameter). */",
    '  path: string;',
    "  /** The same path as Hono's router matches it (`:name` for a parameter). */",
    '  routerPath: string;',
    '  /** `json`: application/json or application/merge-patch+json; `ndjson`: application/x-ndjson, read as a stream; `none`: no request body (one sent is never read). */',
    "  body: 'json' | 'ndjson' | 'none';",
    '  /** `requestBody.required`. */',
    '  bodyRequired: boolean;',
    '  /** The configured limit (`config.limits`) the body is held to, answering 413 above it; null without a body. */',
    "  bodyLimit: 'adminBodyBytes' | 'importBodyBytes' | null;",
    "  /** The request body's declared media types (`requestBody.content`), in document order; empty without a body. */",
    '  mediaTypes: readonly string[];',
    '}',
    '',
    `/** Every operation of ${options.source}, path by path. */`,
    `export const ${options.name}: readonly RouteFacts[] = [`,
    ...facts.map(
      (f) =>
        `  { operationId: ${literal(f.operationId)}, scope: ${literal(f.scope)}, method: ${literal(f.method)}, path: ${literal(f.path)}, routerPath: ${literal(f.routerPath)}, body: ${literal(f.body)}, bodyRequired: ${f.bodyRequired}, bodyLimit: ${literal(f.bodyLimit)}, mediaTypes: ${literal(f.mediaTypes)} },`,
    ),
    '];',
    '',
  ].join('\n');
}
