// A delivery's webhook-id (spec 4.5's X-Service-Replaces and the Standard Webhooks `webhook-id`):
// `dlv_` and 128 random bits in hex, assigned once when the delivery is made and kept by its
// retries. Random rather than the row id, which told a receiver how many deliveries the whole
// deployment had made; the same on both engines (migration 58 gave existing rows theirs).
import { randomBytes } from 'node:crypto';

/** A new delivery's webhook-id: `dlv_` and 32 lowercase hex digits. */
export const newWebhookId = (): string => `dlv_${randomBytes(16).toString('hex')}`;
