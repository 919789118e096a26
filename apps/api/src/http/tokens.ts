/** Injection tokens of the API's infrastructure. */
export const DATABASE_POOL = Symbol('DatabasePool');
export const INFRASTRUCTURE = Symbol('Infrastructure');
export const OPERATOR_TOKEN = Symbol('OperatorToken');
export const FAILED_AUTHENTICATION = Symbol('FailedAuthentication');
export const READINESS = Symbol('Readiness');
export { GATEWAY_CLOCK as CLOCK_TOKEN } from '#payments';
export const REGISTRY = Symbol('Registry');
export const PUBLIC_URL = Symbol('PublicUrl');
export const ACCESS_CONTROL = Symbol('AccessControl');
export const READ_MODEL_REBUILDS = Symbol('ReadModelRebuilds');

/** The address buyers reach the payment page at; known once the server listens. */
export interface PublicUrl {
  value: string;
}
export const IDEMPOTENCY_KEYS = Symbol('IdempotencyKeys');
export const PAGE_FORM_TOKENS = Symbol('PageFormTokens');
export const OPERATOR_SESSIONS = Symbol('OperatorSessions');
export const AUDIT_SIGNER = Symbol('AuditSigner');
