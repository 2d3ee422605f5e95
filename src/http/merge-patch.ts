// PATCH with a JSON merge patch (RFC 7396) on the admin API: the patch's media type is the
// contract (another one answers 415 with Accept-Patch, RFC 5789 section 2.2), and the merged
// document is checked by the schema a PUT of it is checked by (the generated one), so a patch
// can never store what a PUT would refuse.
//
//   app.on('PATCH', '/admin/v1/merchants/:merchant_id/products/:product_ref', patchMediaType(['application/merge-patch+json']));
//   admin.editProduct(merchantId, ref, (current) => mergedDocument(putSchema, current, patch));
import type { z } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { applyMergePatch } from '../shared/merge-patch.js';
import { invalidInput, ProblemError } from '../shared/problem.js';
import { invalidParams } from './validation.js';

/** Answers 415 (with Accept-Patch) unless the request's Content-Type is one of the operation's declared media types. */
export function patchMediaType(mediaTypes: readonly string[]): MiddlewareHandler {
  const accepted = mediaTypes.join(', ');
  return async (c, next) => {
    const contentType = c.req.header('Content-Type');
    // No Content-Type at all is a missing body: the body checks name it (400).
    const essence = contentType?.split(';')[0]!.trim().toLowerCase();
    if (essence !== undefined && !mediaTypes.includes(essence)) {
      throw new ProblemError(
        'unsupported_media_type',
        `The patch must be sent as Content-Type: ${mediaTypes.join(' or ')} (RFC 7396), not ${essence || 'an empty media type'}.`,
        undefined,
        { 'Accept-Patch': accepted },
      );
    }
    return next();
  };
}

/**
 * The document the patch makes of `current`, checked by `schema` (a PUT's body schema): its
 * parsed value, or a 400 naming each offending member by its JSON Pointer in the merged document.
 */
export function mergedDocument<S extends z.ZodType>(schema: S, current: unknown, patch: unknown): z.output<S> {
  const parsed = schema.safeParse(applyMergePatch(current, patch));
  if (!parsed.success) throw invalidInput('body', invalidParams('body', parsed.error));
  return parsed.data;
}
