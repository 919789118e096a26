import { CanActivate, createParamDecorator, ExecutionContext, Inject, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import type { AccessControl, AuthFailureKind, PollMarkRequest, PollMarkResult, Refusal } from '#payments/access';
import { requestSignature, signaturesMatch, TIMESTAMP_WINDOW_SECONDS } from '#payments/access';
import type { Clock } from '#platform/clock';
import type { MerchantIdentity, Registry } from '#payments/merchants';
import { ApiError } from '../errors/api-error';
import type { FailedAuthentication } from './failed-authentication';
import { ACCESS_CONTROL, CLOCK_TOKEN, FAILED_AUTHENTICATION, REGISTRY } from '../tokens';

type MerchantRequest = FastifyRequest & { merchant?: MerchantIdentity; rawBody?: Buffer; pollMark?: PollMarkTaken };

/** A route's poll mark: the resource its path parameters name, or null when they name none (the route answers 404). */
type PollResourceOf = (params: Record<string, string>) => string | null;
const POLL_MARKED = 'merchant-auth:poll-marked';

/**
 * Marks a route that reads one invoice or payout, limited to once per poll interval per
 * key: with a Bearer key the guard takes the mark in the key's own lookup statement
 * (one round trip for authentication, the rate and the poll), and the route reads the
 * verdict with @PollMark(). (An HMAC request's key is known only after its signature
 * holds: the route takes the mark itself.)
 */
export const PollMarked = (resourceOf: PollResourceOf) => SetMetadata(POLL_MARKED, resourceOf);

/** The poll rule's verdict, when the guard took the mark with the key's lookup. */
export interface PollMarkTaken {
  readonly refusal: Refusal | null;
}

const header = (request: FastifyRequest, name: string): string | undefined => {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * Who is calling, by either mode of the spec, then the per-key request rate:
 * - Bearer: `Authorization: Bearer sk_test_…|sk_live_…` (looked up by its hash);
 * - HMAC: `X-Public-Id` (pk_…), `X-Timestamp` (unix seconds, ±300 s of the gateway
 *   clock) and `X-Signature` (or `Signature`): hex HMAC-SHA256 of
 *   `<timestamp>.<exact raw body>` with the project's webhook secret, accepted once.
 * Every lookup goes to the database, so a revoked or rotated key stops at once in
 * every process; so do the replay store and the rate counters. Failed
 * authentications are limited per client address and overall (FailedAuthentication):
 * past the limits a client gets 429 before any lookup.
 */
@Injectable()
export class MerchantAuthGuard implements CanActivate {
  constructor(
    @Inject(REGISTRY) private readonly registry: Registry,
    @Inject(ACCESS_CONTROL) private readonly access: AccessControl,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(FAILED_AUTHENTICATION) private readonly failures: FailedAuthentication,
    private readonly reflector: Reflector,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<MerchantRequest>();
    const now = this.clock.now();
    const bearer = header(request, 'authorization') !== undefined;
    const kind: AuthFailureKind = bearer ? 'secret_key' : 'signature';
    // A client past the failure limits is refused before any lookup.
    this.failures.refuseIfLimited(request, kind);
    let identity: MerchantIdentity;
    let refusal: Refusal | null;
    try {
      if (bearer) {
        // The key's lookup counts the request (and takes a read's poll mark) too: one round trip.
        const resource = this.reflector.get<PollResourceOf | undefined>(POLL_MARKED, context.getHandler())?.(request.params as Record<string, string>);
        const pollMark = resource ? this.access.pollMarkOf(resource, now) : null;
        const counted = await this.bearer(request, now, pollMark);
        identity = counted.identity;
        refusal = await this.access.admitCounted(counted.hits, now);
        if (counted.poll) request.pollMark = { refusal: this.access.pollVerdict(counted.poll, now) };
      } else {
        // Counted only once the signature holds: a forged request must not spend the merchant's limit.
        identity = await this.hmac(request, now);
        refusal = await this.access.admit(identity.keyId, now);
      }
    } catch (error) {
      // Every 401 counts against the client's address, never against a key.
      if (error instanceof ApiError && error.status === 401) throw this.failures.failed(request, kind, error);
      throw error;
    }
    if (refusal) throw rateLimited(refusal.retryAfterSeconds, 'Слишком много запросов: не больше 60 в секунду на ключ');
    request.merchant = identity;
    return true;
  }

  private async bearer(
    request: MerchantRequest,
    now: Date,
    pollMark: PollMarkRequest | null,
  ): Promise<{ identity: MerchantIdentity; hits: number; poll: PollMarkResult | null }> {
    const match = /^Bearer\s+(\S+)$/i.exec(header(request, 'authorization') ?? '');
    if (!match) throw ApiError.unauthorized('Нужен заголовок Authorization: Bearer <секретный ключ проекта>');
    const counted = await this.registry.identifyBySecretKeyCountingRequest(match[1]!, now, pollMark);
    if (!counted) throw ApiError.unauthorized('Ключ не найден или отозван');
    return counted;
  }

  private async hmac(request: MerchantRequest, now: Date): Promise<MerchantIdentity> {
    const publicId = header(request, 'x-public-id');
    if (publicId === undefined) {
      throw ApiError.unauthorized('Нужна авторизация: Authorization: Bearer <ключ> или X-Public-Id с подписью HMAC');
    }
    const identity = await this.registry.identifyByPublicKey(publicId);
    if (!identity) throw ApiError.unauthorized('Публичный ключ не найден или отозван');

    const timestamp = header(request, 'x-timestamp');
    const seconds = timestamp !== undefined && /^\d{1,12}$/.test(timestamp) ? Number(timestamp) : NaN;
    // Whole seconds on both sides: T-300 and T+300 are both inside the window.
    if (Number.isNaN(seconds) || Math.abs(Math.floor(now.getTime() / 1000) - seconds) > TIMESTAMP_WINDOW_SECONDS) {
      // X-Server-Time: the gateway clock in unix seconds, so a client whose clock is off can correct its timestamp.
      throw new ApiError(
        401,
        'timestamp_invalid',
        'X-Timestamp: время запроса в секундах Unix, не дальше 300 секунд от времени сервера',
        undefined,
        undefined,
        {
          'X-Server-Time': String(Math.floor(now.getTime() / 1000)),
        },
      );
    }
    const signature = header(request, 'x-signature') ?? header(request, 'signature') ?? '';
    const expected = requestSignature(identity.project.webhookSecret, timestamp!, request.rawBody ?? '');
    if (!signaturesMatch(expected, signature)) throw new ApiError(401, 'signature_invalid', 'Подпись запроса не совпадает');
    if (!(await this.access.firstUseOfSignature(signature, now))) {
      throw new ApiError(401, 'signature_invalid', 'Эта подпись уже использована: каждая принимается один раз');
    }
    return identity;
  }
}

export function rateLimited(retryAfterSeconds: number, message: string): ApiError {
  return new ApiError(429, 'rate_limited', message, undefined, undefined, { 'Retry-After': String(retryAfterSeconds) });
}

/** The project and mode of the authenticated key. */
export const Merchant = createParamDecorator((_: unknown, context: ExecutionContext): MerchantIdentity => {
  const merchant = context.switchToHttp().getRequest<MerchantRequest>().merchant;
  if (!merchant) throw new Error('Merchant() used on a route without MerchantAuthGuard');
  return merchant;
});

/** The verdict of the poll mark the guard took with the key's lookup (undefined: the route takes it itself). */
export const PollMark = createParamDecorator((_: unknown, context: ExecutionContext): PollMarkTaken | undefined => {
  return context.switchToHttp().getRequest<MerchantRequest>().pollMark;
});
