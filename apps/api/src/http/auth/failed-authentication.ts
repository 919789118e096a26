import type { FastifyRequest } from 'fastify';
import type { AuthFailureKind, AuthFailureLimiter } from '#payments/access';
import type { Clock } from '#platform/clock';
import { ApiError } from '../errors/api-error';

/** Where failed and refused authentications are counted (the process's metrics). */
export interface AuthFailureObserver {
  /** One authentication that failed (answered 401). */
  failed(kind: AuthFailureKind): void;
  /** One request refused with 429 before any lookup, its client being past the failure limits. */
  refused(kind: AuthFailureKind): void;
}

/**
 * The API's side of the failure limits: a client past them is answered 429 with
 * Retry-After before anything is looked up (no database work for a flood), and each
 * 401 counts against its address. The counters are the process's own
 * (AuthFailureLimiter), on the gateway clock.
 */
export class FailedAuthentication {
  constructor(
    private readonly limiter: AuthFailureLimiter,
    private readonly clock: Clock,
    private readonly observer?: AuthFailureObserver,
  ) {}

  /** Throws 429 rate_limited when the request's client is past the failure limits. */
  refuseIfLimited(request: FastifyRequest, kind: AuthFailureKind): void {
    const wait = this.limiter.refusal(request.ip, this.clock.now());
    if (wait === null) return;
    this.observer?.refused(kind);
    throw new ApiError(429, 'rate_limited', 'Слишком много неудачных попыток авторизации с этого адреса: повторите запрос позже', undefined, undefined, {
      'Retry-After': String(wait),
    });
  }

  /** Counts a failed authentication of the request's client; answers the error to throw. */
  failed(request: FastifyRequest, kind: AuthFailureKind, error: ApiError): ApiError {
    this.limiter.recordFailure(request.ip, this.clock.now());
    this.observer?.failed(kind);
    return error;
  }
}
