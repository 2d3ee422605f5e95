// The change feed's cursor as a client sends it (spec 4.4, cursor rule 1): `since` and `since_id`
// in the query, or both halves in a stream's `Last-Event-ID`. One parser reads both: the header's
// halves are checked by the very schemas the route checks `since` and `since_id` with (generated
// from openapi/), so an instant `since` refuses (2025-02-30, T24:00:00Z) is refused there as well.
import { routes } from '../generated/public-routes.js';
import { invalidInput } from '../shared/problem.js';

const { since: SINCE, since_id: SINCE_ID } = routes.listChanges.request.query.shape;

/** The position a request names: none (the feed's start), or `since` with its `since_id`. */
export interface FeedCursor {
  since?: string;
  sinceId?: number;
}

/**
 * The cursor of a `GET /v1/changes`: its Last-Event-ID when sent (it takes precedence), else its
 * validated `since` and `since_id`. `sinceIdSent`: whether the query named `since_id` at all.
 */
export function feedCursor(query: { since?: string; since_id: number }, sinceIdSent: boolean, lastEventId: string | undefined): FeedCursor {
  if (lastEventId !== undefined) return cursorOfEventId(lastEventId);
  // The two halves travel together (a stream's Last-Event-ID carries both).
  if (query.since === undefined && sinceIdSent) {
    throw invalidInput('query', [{ name: 'since_id', in: 'query', reason: 'must be sent together with since' }]);
  }
  return { since: query.since, sinceId: query.since_id };
}

/** The cursor a Last-Event-ID names, `{next_since}/{next_id}`, each half read as `since` and `since_id` are. */
export function cursorOfEventId(lastEventId: string): { since: string; sinceId: number } {
  const slash = lastEventId.lastIndexOf('/');
  const since = SINCE.safeParse(lastEventId.slice(0, slash));
  const sinceId = SINCE_ID.safeParse(lastEventId.slice(slash + 1));
  if (slash < 0 || !since.success || since.data === undefined || !sinceId.success) {
    throw invalidInput('header', [
      {
        name: 'last-event-id',
        in: 'header',
        reason: 'must be the id of an event, {next_since}/{next_id}: a real UTC date-time in whole seconds, a slash and an integer',
      },
    ]);
  }
  return { since: since.data, sinceId: sinceId.data };
}
