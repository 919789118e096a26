/**
 * The webhook rules of the spec, as pure functions: which log events are webhooks
 * of which kind, the signature, and the retry schedule.
 */
import { createHmac } from 'node:crypto';
import type { WebhookEventKind } from '../merchants';

/**
 * An operator's cancellation (PayoutCancelled) is a `payout.rejected` too: the spec's two
 * payout events are the results a merchant waits for, and a cancelled payout's amount
 * returns to the balance as a rejected one's does; `data.payout.status` tells them apart.
 */
const KINDS: Readonly<Record<string, Readonly<Record<string, WebhookEventKind>>>> = {
  invoice: { InvoicePaid: 'invoice.paid', InvoiceFailed: 'invoice.failed', InvoiceExpired: 'invoice.expired' },
  refund: { RefundSucceeded: 'refund.succeeded', RefundFailed: 'refund.failed' },
  payout: { PayoutPaid: 'payout.paid', PayoutRejected: 'payout.rejected', PayoutCancelled: 'payout.rejected' },
};

/** The webhook kind a stored event stands for, or null. */
export function webhookKindOf(streamName: string, eventType: string): WebhookEventKind | null {
  const category = streamName.slice(0, streamName.indexOf('-'));
  return Object.hasOwn(KINDS, category) && Object.hasOwn(KINDS[category]!, eventType) ? KINDS[category]![eventType]! : null;
}

/** The event types that become webhooks (for the log filter). */
export const WEBHOOK_SOURCE_EVENT_TYPES: readonly string[] = Object.values(KINDS).flatMap((byType) => Object.keys(byType));

/** The invoice's record of a refund's outcome: the refund's webhook waits for it (and for the outcome). */
export const REFUND_RECORDS_ON_INVOICE: readonly string[] = ['InvoiceRefunded', 'InvoiceRefundReleased'];

/** `X-Service-Signature`: sha256= and the hex HMAC-SHA256 of the exact body, keyed with the project's webhook secret. */
export function webhookSignature(body: string | Buffer, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** The header of the signature that also covers the delivery's timestamp (a receiver can refuse replays). */
export const TIMESTAMPED_SIGNATURE_HEADER = 'x-service-signature-timestamped';

/**
 * `X-Service-Signature-Timestamped`: `t=<unix seconds>,v2=<hex>`, the hex HMAC-SHA256 of
 * `webhook.<t>.<exact body>` keyed with the project's webhook secret; `t` is the attempt's
 * X-Service-Timestamp (the gateway clock). The `webhook.` prefix keeps it apart from the
 * spec's HMAC API credential, `<X-Timestamp>.<body>` with the same secret: without it a
 * delivery seen by anyone would be a signed API request for 300 s.
 */
export function webhookTimestampedSignature(body: string | Buffer, secret: string, unixSeconds: number): string {
  return `t=${unixSeconds},v2=${createHmac('sha256', secret).update(`webhook.${unixSeconds}.`).update(body).digest('hex')}`;
}

/**
 * Standard Webhooks' `webhook-signature` (standardwebhooks.com): `v1,` and the base64
 * HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<exact body>`, keyed with the
 * project's webhook secret as UTF-8 bytes. A stock verifier is given the secret as
 * `whsec_` followed by those bytes in base64.
 */
export function standardWebhookSignature(id: string, unixSeconds: number, body: string | Buffer, secret: string): string {
  return `v1,${createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${id}.${unixSeconds}.`).update(body).digest('base64')}`;
}

/** Spec: retried after 1 min, 5 min, 30 min, 2 h, 12 h and 24 h; then the delivery has failed. */
export const RETRY_SCHEDULE_SECONDS: readonly number[] = [60, 300, 1800, 7200, 43_200, 86_400];

/** After the n-th failed attempt since the schedule (re)started (n ≥ 1): seconds to the next one, or null: give up. */
export function retryDelaySeconds(failedAttempts: number): number | null {
  return failedAttempts >= 1 && failedAttempts <= RETRY_SCHEDULE_SECONDS.length ? RETRY_SCHEDULE_SECONDS[failedAttempts - 1]! : null;
}

/** Spec: a reply counts only if it is 2xx within 10 seconds. */
export const WEBHOOK_REPLY_TIMEOUT_MS = 10_000;
/** The part of a reply body kept in the history (and read at all). */
export const WEBHOOK_REPLY_BODY_LIMIT = 4096;

export const isAcknowledged = (statusCode: number | null): boolean => statusCode !== null && statusCode >= 200 && statusCode < 300;

/**
 * What one attempt's reply makes of the delivery: delivered on a 2xx; otherwise the
 * next attempt after the schedule's delay (counted from the last resend), or failed
 * for good after the last one. `attempt` is the delivery's attempt number (from 1).
 */
export function attemptOutcome(
  statusCode: number | null,
  attempt: number,
  scheduleBase: number,
  now: Date,
): { status: 'delivered' | 'pending' | 'failed'; nextAttemptAt: Date | null } {
  if (isAcknowledged(statusCode)) return { status: 'delivered', nextAttemptAt: null };
  const delay = retryDelaySeconds(attempt - scheduleBase);
  return delay === null ? { status: 'failed', nextAttemptAt: null } : { status: 'pending', nextAttemptAt: new Date(now.getTime() + delay * 1000) };
}
