import type { ErrorDetail } from './types';

/** The spec's error codes (a gateway may add codes: any string is possible). */
export type GatewayErrorCode =
  | 'validation'
  | 'unauthorized'
  | 'timestamp_invalid'
  | 'signature_invalid'
  | 'project_not_active'
  | 'test_mode'
  | 'invoice_not_found'
  | 'address_not_found'
  | 'not_found'
  | 'duplicate_request'
  | 'order_id_conflict'
  | 'conflict'
  | 'too_many_pending'
  | 'amount_out_of_range'
  | 'method_unavailable'
  | 'customer_fee_pct_too_high'
  | 'refund_exceeds_amount'
  | 'insufficient_balance'
  | 'address_not_confirmed'
  | 'rate_limited'
  | 'request_timeout'
  | 'internal'
  | 'provider_unavailable'
  | 'idempotency_key_conflict'
  | 'idempotency_key_in_use'
  | (string & Record<never, never>);

/** An error answer of the gateway (`{error: {code, message, param?, details?}}`), after the retries the rules allow. */
export class PaymentGatewayError extends Error {
  override readonly name = 'PaymentGatewayError';
  constructor(
    /** The HTTP status. */
    readonly status: number,
    /** The stable machine-readable code: act on it, not on the message. */
    readonly code: GatewayErrorCode,
    /** The gateway's message (Russian, for logs). */
    message: string,
    /** The request field concerned (for example amount, customer.email). */
    readonly param: string | undefined,
    /** Validation details: one per violation. */
    readonly details: readonly ErrorDetail[] | undefined,
    /** The request that failed, `METHOD /path`. */
    readonly request: string,
    /** How many attempts were made (1 = no retry). */
    readonly attempts: number,
    /** Retry-After of the answer, in seconds, when it had one. */
    readonly retryAfterSeconds: number | undefined,
    /** The answer's X-Request-Id: quote it to the gateway's support (it is in their logs). */
    readonly requestId?: string,
    /** The Idempotency-Key sent on every attempt (a refund's or payout's generated unless given; an invoice's only if given): repeat the call with it, never with a new one. */
    readonly idempotencyKey?: string,
    /**
     * A POST that may have acted (its message says so): some attempt of the call, not only the last, got no answer,
     * a 2xx or 5xx page not the API's (a proxy's), a redirect, a 500, a 502 or 504, a 503 marked "записано ли что-то"
     * (docs/api.md), or 409 idempotency_key_in_use (the key's first request still running). Repeat it with `idempotencyKey`
     * (POST /invoices: the same orderId), never a new key. False: no attempt acted, every answer said nothing was done (a
     * 4xx, a 429, the gateway's unmarked 503); a GET is always false.
     */
    readonly outcomeUnknown: boolean = false,
  ) {
    super(message);
  }
}

/**
 * No answer from the gateway (connection refused or reset, timeout) after the retries the
 * rules allow. For a POST the outcome is unknown (the gateway may have acted; `outcomeUnknown`
 * true): repeat the call with `idempotencyKey` (POST /invoices: the same orderId), and it cannot act twice.
 */
export class PaymentGatewayConnectionError extends Error {
  override readonly name = 'PaymentGatewayConnectionError';
  /** The Idempotency-Key sent on every attempt (generated unless given), when the request carried one. */
  readonly idempotencyKey: string | undefined;
  /** A POST: true (the last attempt got no answer, so it may have acted); a GET: false. */
  readonly outcomeUnknown: boolean;
  constructor(
    message: string,
    readonly request: string,
    readonly attempts: number,
    options: { cause?: unknown; idempotencyKey?: string | undefined; outcomeUnknown?: boolean | undefined } = {},
  ) {
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
    this.idempotencyKey = options.idempotencyKey;
    this.outcomeUnknown = options.outcomeUnknown ?? false;
  }
}

/**
 * The call was cancelled by the caller's `signal` (named `AbortError`, as fetch's; `cause`:
 * the signal's reason). A POST cut in flight, or one an earlier attempt of may have acted:
 * `outcomeUnknown` true, repeat the call with `idempotencyKey` (POST /invoices: the same orderId) to learn it.
 */
export class PaymentGatewayAbortError extends Error {
  override readonly name = 'AbortError';
  /** The Idempotency-Key sent on every attempt (generated unless given), when the request carried one. */
  readonly idempotencyKey: string | undefined;
  /** A POST that may have acted (as PaymentGatewayError's): cut in flight, or an earlier attempt may have; false: nothing sent, or every answer said nothing was done. */
  readonly outcomeUnknown: boolean;
  constructor(
    message: string,
    readonly request: string,
    /** How many attempts were sent (0: none). */
    readonly attempts: number,
    options: { cause?: unknown; idempotencyKey?: string | undefined; outcomeUnknown?: boolean | undefined } = {},
  ) {
    super(message, { cause: options.cause });
    this.idempotencyKey = options.idempotencyKey;
    this.outcomeUnknown = options.outcomeUnknown ?? false;
  }
}

/** Why a webhook was refused by verifyWebhook. */
export type WebhookVerificationErrorCode =
  /** X-Service-Signature is missing (or X-Service-Signature-Timestamped, unless `requireTimestamp: false`). */
  | 'signature_missing'
  /** A signature does not match the raw body and the secret, or is malformed. */
  | 'signature_invalid'
  /** The timestamped signature's `t` is farther than the tolerance from now (a replay or a wrong clock). */
  | 'timestamp_invalid'
  /** The signed body is not a webhook event (not JSON, or without id and type). */
  | 'payload_invalid'
  /** rawBody is not the bytes received (a string, a Buffer or other view of bytes, an ArrayBuffer): a parsed JSON body, undefined. */
  | 'raw_body_required'
  /** A delivery of the other mode than `options.mode` (isTest). */
  | 'mode_mismatch';

export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  constructor(
    readonly code: WebhookVerificationErrorCode,
    message: string,
  ) {
    super(message);
  }
}
