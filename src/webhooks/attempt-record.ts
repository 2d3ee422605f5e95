// An attempt's row in the attempt log, as the dispatcher records it (attempt-recorder.ts).
import { validText } from '../shared/valid-text.js';
import type { NewAttempt } from './model.js';
import type { SendResult } from './sender.js';
import type { DeliveryHeaders } from './signing.js';

/** The request an attempt sent: the receiver URL and the headers the service set. */
export interface SentRequest {
  url: string;
  headers: DeliveryHeaders;
}

/**
 * An attempt's row in the attempt log: the request it sent and what came back. Whatever a receiver
 * (or a sender) gave is stored as valid text: a snippet with U+0000 made PostgreSQL
 * refuse the attempt, which then stayed unrecorded and was sent again each time its lease ran out.
 */
export function attemptRecord(result: SendResult, at: Date, request: SentRequest): NewAttempt {
  return {
    at: at.toISOString(),
    status_code: result.statusCode,
    error: result.error === null ? null : validText(result.error),
    latency_ms: result.latencyMs,
    response_snippet: result.responseSnippet === null ? null : validText(result.responseSnippet),
    request_url: request.url,
    request_headers: request.headers,
  };
}
