import { createHash, timingSafeEqual } from 'node:crypto';

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

  constructor(token: string) {
    this.expected = digest(token);
  }

  check(authorization: string | string[] | undefined): OperatorTokenCheck {
    const header = Array.isArray(authorization) ? authorization[0] : authorization;
    if (header === undefined) return 'absent';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    return match && timingSafeEqual(digest(match[1]!), this.expected) ? 'valid' : 'invalid';
  }
}
