import { isIP } from 'node:net';
import type { FastifyRequest } from 'fastify';
import type { AuthFailureKind, AuthFailureLimiter } from '#payments/access';
import type { Clock } from '#platform/clock';
import { ApiError } from '../errors/api-error';

/** Where failed authentications are counted (the process's metrics). */
export interface AuthFailureObserver {
  /** One authentication that failed within the limits (answered 401). */
  failed(kind: AuthFailureKind): void;
  /** One authentication that failed past the limits (answered 429). */
  refused(kind: AuthFailureKind): void;
  /** One failed authentication that asked the database about its credential. */
  lookedUp(kind: AuthFailureKind): void;
}

/**
 * The API's side of the failure limits. Only an attempt already known to fail comes
 * here: within the limits it keeps its 401, past them (per client address, or
 * overall) it is answered 429 with Retry-After. A credential that holds never comes
 * here, so it is never refused because of anyone's failures. The counters are the
 * process's own (AuthFailureLimiter), on the gateway clock.
 */
export class FailedAuthentication {
  constructor(
    private readonly limiter: AuthFailureLimiter,
    private readonly clock: Clock,
    private readonly observer?: AuthFailureObserver,
  ) {}

  /**
   * Counts the request's failure; answers the error to throw: `error` (401) within the
   * limits, else 429. `lookedUp`: the request asked the database about its credential
   * (what failures cost the database is counted too).
   */
  reject(request: FastifyRequest, kind: AuthFailureKind, error: ApiError, lookedUp = false): ApiError {
    if (lookedUp) this.observer?.lookedUp(kind);
    const refusal = this.limiter.refusal(clientAddress(request), this.clock.now());
    if (refusal === null) {
      this.observer?.failed(kind);
      return error;
    }
    this.observer?.refused(kind);
    // The overall limit is not this address's doing: say so, or a client that failed once blames itself.
    const message =
      refusal.by === 'address'
        ? 'Слишком много неудачных попыток авторизации с этого адреса: повторите запрос позже'
        : `Слишком много неудачных попыток авторизации на этом сервере со всех адресов: повторите запрос через ${refusal.seconds} с`;
    return new ApiError(429, 'rate_limited', message, undefined, undefined, { 'Retry-After': String(refusal.seconds) });
  }
}

/**
 * The address a failure is counted for: the client's (the X-Forwarded-For entry a trusted
 * proxy names, as Fastify reads it), or, when that entry is not an address at all, the
 * peer that sent it: made-up names must not each get a count of their own.
 */
export function clientAddress(request: FastifyRequest): string {
  const named = request.ip.split('%', 1)[0]!;
  return isIP(named) !== 0 ? request.ip : (request.socket.remoteAddress ?? request.ip);
}
