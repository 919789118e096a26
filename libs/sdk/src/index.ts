/**
 * @payment-gateway/sdk: the merchant API v1 client (both auth modes, the spec's retries,
 * typed errors, paging), webhook verification, and the API's types generated from
 * GET /v1/openapi.json.
 */
export { PaymentGatewayClient, MAX_TIMESTAMP_LEAD_SECONDS } from './client';
export type { Authentication, CallOptions, Creation, PaymentGatewayClientOptions, PostOptions } from './client';
export { PaymentGatewayError, PaymentGatewayConnectionError, PaymentGatewayAbortError, WebhookVerificationError } from './errors';
export type { GatewayErrorCode, WebhookVerificationErrorCode } from './errors';
export { verifyWebhook, SIGNATURE_HEADER, TIMESTAMPED_SIGNATURE_HEADER, DEFAULT_TOLERANCE_SECONDS } from './webhooks';
export type { VerifyWebhookOptions, WebhookHeaders } from './webhooks';
export { signRequest } from './signing';
export { verifyStatement, canonicalJson } from './statements';
export type { AuditPublicKey, ExpectedStatement } from './statements';
export { MAX_RETRIES, FIRST_DELAY_MS, MAX_WAIT_SECONDS, MAYBE_WRITTEN_MARK, backoffMs, retryDelayMs } from './retry-policy';
export type { AttemptOutcome, RetryContext } from './retry-policy';
export type * from './types';
export type { components, operations, paths, webhooks } from './generated/openapi';
