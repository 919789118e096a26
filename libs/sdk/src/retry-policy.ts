/**
 * The spec's retry guidance as a pure decision: retry 429 after Retry-After, 500, 503 (and
 * 408), network failures and a proxy's 502 or 504 or other 5xx not in the API's error shape
 * (a timeout on the way: the gateway may have acted, as with no answer) with a delay growing
 * from 250 ms (a 408's, 502's, 503's or 504's Retry-After when longer), at most 4 retries; never 400, 401, 403, 404, 409 or 422 unchanged
 * but the 409 idempotency_key_in_use of a keyed POST (its key still running: the same key cannot act twice). A POST is retried only
 * when a repeat cannot act twice: POST /invoices by its orderId, every other POST by its
 * Idempotency-Key. No one wait is longer than MAX_WAIT_SECONDS: an answer asking for more
 * is the caller's to decide.
 */

export const MAX_RETRIES = 4;
export const FIRST_DELAY_MS = 250;
/** The longest one wait: an answer asking for a longer Retry-After is thrown at once (its error carries retryAfterSeconds). */
export const MAX_WAIT_SECONDS = 60;

/** What came back from one attempt. */
export type AttemptOutcome =
  | { readonly kind: 'answer'; readonly status: number; readonly code?: string | undefined; readonly retryAfterSeconds?: number | undefined }
  | { readonly kind: 'network' };

export interface RetryContext {
  /** Retries made so far (0 after the first attempt). */
  readonly retriesSoFar: number;
  readonly maxRetries: number;
  /** A repeat cannot act twice (a GET; POST /invoices with its orderId; a POST with an Idempotency-Key). */
  readonly repeatable: boolean;
}

/** The delay before the n-th retry (n ≥ 1) without Retry-After: 250 ms, 500 ms, 1 s, 2 s, … */
export const backoffMs = (retry: number): number => FIRST_DELAY_MS * 2 ** (retry - 1);

/** How long to wait before the next attempt, or null: do not retry. */
export function retryDelayMs(outcome: AttemptOutcome, context: RetryContext): number | null {
  if (context.retriesSoFar >= context.maxRetries) return null;
  const retry = context.retriesSoFar + 1;
  // A 429 was refused before anything ran: any request may be repeated after Retry-After.
  if (outcome.kind === 'answer' && outcome.status === 429) {
    if (outcome.retryAfterSeconds === undefined) return backoffMs(retry);
    return outcome.retryAfterSeconds > MAX_WAIT_SECONDS ? null : outcome.retryAfterSeconds * 1000;
  }
  if (!context.repeatable) return null;
  if (outcome.kind === 'network') return backoffMs(retry);
  switch (outcome.status) {
    case 500:
      return backoffMs(retry);
    // 408 request_timeout: the body did not arrive, nothing was done (the gateway's documents: safe to send again).
    // A proxy's 502 or 504 (nginx, a load balancer): the gateway did not answer it in time, like no answer.
    case 408:
    case 502:
    case 504:
    case 503:
    case 409: {
      // 409 idempotency_key_in_use: this key's first request is still running (often this call's own attempt that outlived
      // timeoutMs); the same key again cannot act twice, and gets that request's answer once stored. The one 409 retried.
      if (outcome.status === 409 && outcome.code !== 'idempotency_key_in_use') return null;
      // The spec's growing delay, or the server's Retry-After when longer (HTTP's meaning of the header: the gateway
      // asks 5 s while it rebuilds a read model, nginx 1 s), bounded as a 429's.
      const asked = outcome.retryAfterSeconds;
      if (asked === undefined) return backoffMs(retry);
      return asked > MAX_WAIT_SECONDS ? null : Math.max(backoffMs(retry), asked * 1000);
    }
    default:
      // A 5xx page not in the API's error shape (code unexpected_response): a proxy's, as a 502's.
      if (outcome.status >= 500 && outcome.code === 'unexpected_response') return backoffMs(retry);
      // Never 400, 401, 403, 404, 409 (but idempotency_key_in_use, above) or 422: the spec's rule.
      return null;
  }
}

/**
 * The mark of the gateway's 503 whose write may have been done (and nginx's for a write a replica got), in its
 * message: the error's shape has no field for it (docs/api.md, "What is safe to retry"). The gateway's own constant
 * (apps/api/src/http/errors/error.filter.ts), copied: the package cannot import the gateway; a test keeps them equal.
 */
export const MAYBE_WRITTEN_MARK = 'записано ли что-то';

/**
 * Retry-After in whole seconds, or undefined: delay-seconds (the spec's form) or an HTTP-date (RFC 9110, a proxy's),
 * counted from the answer's Date header when it has one (the clocks of the two may differ), else from the local clock
 * `nowMs`; a date past is 0.
 */
export function parseRetryAfter(value: string | null, answerDate: string | null, nowMs: number): number | undefined {
  const given = value?.trim() ?? '';
  if (/^\d{1,6}$/.test(given)) return Number(given);
  const at = httpDateMs(given);
  if (at === undefined) return undefined;
  const from = httpDateMs(answerDate?.trim() ?? '') ?? nowMs;
  return Math.max(0, Math.ceil((at - from) / 1000));
}

/** An HTTP-date in ms: IMF-fixdate, or the obsolete RFC 850 and asctime forms that RFC 9110 has recipients accept (all GMT). */
function httpDateMs(value: string): number | undefined {
  const imfOrRfc850 = /^[A-Za-z]{3,9}, \d{2}[ -][A-Za-z]{3}[ -]\d{2}(\d{2})? \d{2}:\d{2}:\d{2} GMT$/;
  const asctime = /^[A-Za-z]{3} [A-Za-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;
  const ms = imfOrRfc850.test(value) ? Date.parse(value) : asctime.test(value) ? Date.parse(`${value} GMT`) : NaN;
  return Number.isFinite(ms) ? ms : undefined;
}
