import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** What a request's Authorization header says about the operator token. */
export type OperatorTokenCheck = 'absent' | 'valid' | 'invalid';

/**
 * The operator token (ADMIN_TOKEN), compared in constant time (digests of equal
 * length): the operator API, GET /metrics on the API port and the detail of
 * GET /health/ready ask for `Authorization: Bearer <ADMIN_TOKEN>`.
 */
export class OperatorToken {
  private readonly expected: Buffer;
  /**
   * What the console's sessions are bound to (HMAC-SHA256 keyed with the token, so
   * the stored value tells nothing about the token): a new ADMIN_TOKEN ends them all.
   */
  readonly sessionFingerprint: Buffer;

  constructor(token: string) {
    this.expected = digest(token);
    this.sessionFingerprint = createHmac('sha256', token).update('operator-console-session').digest();
  }

  /** The token itself (the console's login form), compared in constant time. */
  matches(token: string | undefined): boolean {
    return token !== undefined && timingSafeEqual(digest(token), this.expected);
  }

  /** `authorization`: the request's header (authorizationOf), every value when repeated: a repeat is invalid. */
  check(authorization: string | string[] | undefined): OperatorTokenCheck {
    if (Array.isArray(authorization) && authorization.length > 1) return 'invalid';
    const header = Array.isArray(authorization) ? authorization[0] : authorization;
    if (header === undefined) return 'absent';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    return match && timingSafeEqual(digest(match[1]!), this.expected) ? 'valid' : 'invalid';
  }
}
