import { CanActivate, createParamDecorator, ExecutionContext, Inject, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import type { AccessControl, PollMarkRequest, PollMarkResult, Refusal } from '#payments/access';
import { requestSignature, signaturesMatch, TIMESTAMP_WINDOW_SECONDS } from '#payments/access';
import type { Clock } from '#platform/clock';
import { hashSecretKey } from '#payments/merchants';
import type { MerchantIdentity, Registry } from '#payments/merchants';
import { ApiError } from '../errors/api-error';
import { plural } from '../plural';
import { authorizationOf, repeatedHeader } from './authorization-header';
import { sentParameters } from '../request-pipe';
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
 * holds: the guard takes the mark once the request is within the rate.)
 */
export const PollMarked = (resourceOf: PollResourceOf) => SetMetadata(POLL_MARKED, resourceOf);

/** The poll rule's verdict, when the guard took the mark with the key's lookup. */
export interface PollMarkTaken {
  readonly refusal: Refusal | null;
}

/** The headers of an HMAC request, each of which may be sent once. */
const HMAC_HEADERS = ['X-Public-Id', 'X-Timestamp', 'X-Signature'] as const;

const header = (request: FastifyRequest, name: string): string | undefined => {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * The HMAC header the request repeats, if any. `Signature` is ours only without
 * X-Signature: beside it, it is another's (an RFC 9421 signature a proxy added) and may repeat.
 */
function repeatedHmacHeader(request: FastifyRequest): string | null {
  const repeated = HMAC_HEADERS.find((name) => repeatedHeader(request, [name.toLowerCase()]) !== null);
  if (repeated !== undefined) return repeated;
  return header(request, 'x-signature') === undefined && repeatedHeader(request, ['signature']) !== null ? 'Signature' : null;
}

/**
 * Who is calling, by either mode of the spec, then the per-key request rate:
 * - Bearer: `Authorization: Bearer sk_test_…|sk_live_…` (looked up by its hash; sent
 *   twice: refused, see authorizationOf);
 * - HMAC: `X-Public-Id` (pk_…), `X-Timestamp` (unix seconds, ±300 s of the gateway
 *   clock) and `X-Signature` (or `Signature`): hex HMAC-SHA256 of
 *   `<timestamp>.<exact raw body>` with the project's webhook secret, accepted once
 *   (each header sent once: a repeat is refused as a repeated Authorization is).
 *
 * Every request whose credential holds is looked up in the database, so a revoked or
 * rotated key stops at its next request in every process; so do the replay store and
 * the rate counters. A failing attempt is told apart before any lookup where that
 * cannot be wrong: a key without the tag every issued key carries (KeyTags), a
 * credential this process already found dead, a signature that does not match the
 * public id's webhook secret (Registry.knownSecretKeys, knownPublicIds; the secrets
 * remembered are forgotten within a poll when one is replaced, and a signature made
 * with a replaced one is refused once looked up). Only failures are counted against
 * the client's address (FailedAuthentication), and past the limits they get 429.
 * A valid key's own refusals (a replayed signature, a timestamp out of the window
 * with a signature that holds) are not failures of the address: they are answered
 * 401 and counted nowhere.
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
    let identity: MerchantIdentity;
    let refusal: Refusal | null;
    // The spec's two modes, one per request: an Authorization header that carries nothing
    // beside X-Public-Id (a framework's empty default) is no Bearer request.
    // A repeated Authorization (an array) is refused on the Bearer path, whichever comes first; so is an empty
    // X-Public-Id beside a Bearer key taken as none.
    const authorization = authorizationOf(request);
    const signed = (header(request, 'x-public-id') ?? '').trim() !== '';
    if (authorization !== undefined && !(signed && typeof authorization === 'string' && authorization.trim() === '')) {
      if (signed) {
        const error = ApiError.unauthorized(
          'Передайте один способ авторизации: Authorization: Bearer или X-Public-Id с подписью',
          'unauthorized',
          undefined,
          undefined,
          'X-Public-Id',
        );
        throw this.failures.reject(request, 'secret_key', error, false);
      }
      // The key's lookup counts the request (and takes a read's poll mark) too: one round trip.
      // Not when parameters were sent: these reads take none (NoParameters), so the request
      // will be refused (400) and must not spend the poll.
      const resource = this.pollResource(context, request);
      const pollMark = resource ? this.access.pollMarkOf(resource, now) : null;
      const counted = await this.bearer(request, authorization, now, pollMark);
      identity = counted.identity;
      refusal = await this.access.admitCounted(counted.hits, now);
      if (counted.poll) request.pollMark = { refusal: this.access.pollVerdict(counted.poll, now) };
    } else {
      // Counted only once the signature holds and is recorded as used (one atomic insert): of
      // copies sent at once, one is counted and the others are replays, which spend nothing.
      const signedBy = await this.hmac(request, now);
      identity = signedBy.identity;
      if (!(await this.access.firstUseOfSignature(signedBy.signature, now))) throw signatureUsed();
      refusal = await this.access.admit(identity.keyId, now);
      if (!refusal) {
        const resource = this.pollResource(context, request);
        if (resource && this.access.pollMarkOf(resource, now)) request.pollMark = { refusal: await this.access.admitPoll(identity.keyId, resource, now) };
      }
      // Refused 429 (the rate, or the route's poll mark): the record is undone, so it may be sent again after Retry-After.
      if (refusal || request.pollMark?.refusal) await this.access.releaseSignature(signedBy.signature, now);
    }
    if (refusal) throw rateLimited(refusal.retryAfterSeconds, `Слишком много запросов: не больше ${this.access.limits.perSecond} в секунду на ключ`);
    request.merchant = identity;
    return true;
  }

  /** The resource a poll-marked route reads; null elsewhere, or when parameters were sent (refused 400: no poll is spent). */
  private pollResource(context: ExecutionContext, request: MerchantRequest): string | null {
    if (sentParameters(request.query)) return null;
    return this.reflector.get<PollResourceOf | undefined>(POLL_MARKED, context.getHandler())?.(request.params as Record<string, string>) ?? null;
  }

  private async bearer(
    request: MerchantRequest,
    authorization: string | string[],
    now: Date,
    pollMark: PollMarkRequest | null,
  ): Promise<{ identity: MerchantIdentity; hits: number; poll: PollMarkResult | null }> {
    // Whether this request ran a lookup (a probe shared with concurrent ones ran in only one of them).
    let lookedUp = false;
    const fail = (message: string) => this.failures.reject(request, 'secret_key', ApiError.unauthorized(message), lookedUp);
    if (Array.isArray(authorization)) throw fail('Заголовок Authorization повторён: передайте его один раз');
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (!match) throw fail('Нужен заголовок Authorization: Bearer <секретный ключ проекта>');
    const secretKey = match[1]!;
    const unknown = 'Ключ не найден или отозван';
    const hash = hashSecretKey(secretKey);
    if (!(await this.registry.carriesSecretKeyTag(secretKey, hash))) throw fail(unknown);
    if (this.registry.knownSecretKeys.isDead(hash)) throw fail(unknown);
    if (this.registry.knownSecretKeys.seenLive(hash) === undefined) {
      const mode = secretKey.startsWith('sk_live_') ? 'live' : 'test';
      const live = await this.registry.knownSecretKeys.probe(
        hash,
        async () => {
          lookedUp = true;
          return (await this.registry.secretKeyIsLive(hash, mode)) ? true : null;
        },
        () => true as const,
      );
      if (live === null) throw fail(unknown);
    }
    lookedUp = true;
    const counted = await this.registry.identifyBySecretKeyCountingRequest(secretKey, now, pollMark, hash);
    if (!counted) {
      this.registry.knownSecretKeys.markDead(hash);
      throw fail(unknown);
    }
    return counted;
  }

  /** The key of a request whose signature holds, and the signature (recorded as used by canActivate: a replay is refused there). */
  private async hmac(request: MerchantRequest, now: Date): Promise<{ identity: MerchantIdentity; signature: string }> {
    let lookedUp = false;
    const fail = (error: ApiError) => this.failures.reject(request, 'signature', error, lookedUp);
    // A repeat is refused as a repeated Authorization is: 401 naming the header, a failure of the address.
    const repeated = repeatedHmacHeader(request);
    if (repeated !== null) {
      throw fail(ApiError.unauthorized(`Заголовок ${repeated} повторён: передайте его один раз`, 'unauthorized', undefined, undefined, repeated));
    }
    const publicId = header(request, 'x-public-id');
    if (publicId === undefined) {
      throw fail(ApiError.unauthorized('Нужна авторизация: Authorization: Bearer <ключ> или X-Public-Id с подписью HMAC'));
    }
    const unknown = 'Публичный ключ не найден или отозван';
    if (!(await this.registry.keyTags()).isPublicId(publicId) || this.registry.knownPublicIds.isDead(publicId)) throw fail(ApiError.unauthorized(unknown));
    // The identity looked up during this request, if one was: the authority on whether the key is live.
    let identity: MerchantIdentity | null = null;
    let webhookSecret = this.registry.knownPublicIds.seenLive(publicId);
    if (webhookSecret === undefined) {
      identity = await this.registry.knownPublicIds.probe(
        publicId,
        () => {
          lookedUp = true;
          return this.registry.identifyByPublicKey(publicId);
        },
        // Opened here, not with every lookup: one that does not open fails naming its project (not Bearer requests).
        (found) => this.registry.webhookSecretOf(found.project),
      );
      if (identity === null) throw fail(ApiError.unauthorized(unknown));
      webhookSecret = this.registry.webhookSecretOf(identity.project);
    }
    const lookUpNow = async (): Promise<MerchantIdentity> => {
      if (identity !== null) return identity;
      lookedUp = true;
      const found = await this.registry.identifyByPublicKey(publicId);
      if (found === null) {
        this.registry.knownPublicIds.markDead(publicId);
        throw fail(ApiError.unauthorized(unknown));
      }
      return found;
    };

    const timestamp = header(request, 'x-timestamp');
    const signature = header(request, 'x-signature') ?? header(request, 'signature') ?? '';
    const signed = timestamp !== undefined && signaturesMatch(requestSignature(webhookSecret, timestamp, request.rawBody ?? ''), signature);
    const seconds = timestamp !== undefined && /^\d{1,12}$/.test(timestamp) ? Number(timestamp) : NaN;
    // Whole seconds on both sides: T-300 and T+300 are both inside the window.
    if (Number.isNaN(seconds) || Math.abs(Math.floor(now.getTime() / 1000) - seconds) > TIMESTAMP_WINDOW_SECONDS) {
      // X-Server-Time: the gateway clock in unix seconds, so a client whose clock is off can correct its timestamp.
      const late = ApiError.unauthorized(
        'X-Timestamp: время запроса в секундах Unix, не дальше 300 секунд от времени сервера',
        'timestamp_invalid',
        undefined,
        {
          'X-Server-Time': String(Math.floor(now.getTime() / 1000)),
        },
      );
      // Signed with the key's secret: the key's own request with a clock off, not a failure of the address.
      if (!signed) throw fail(late);
      await lookUpNow();
      throw late;
    }
    // param tells the two signature_invalid apart: X-Signature does not match (signing again cannot help), or
    // X-Timestamp: this timestamp and body were signed before (a later second can).
    const mismatch = () => ApiError.unauthorized('Подпись запроса не совпадает', 'signature_invalid', undefined, undefined, 'X-Signature');
    if (!signed) throw fail(mismatch());
    const live = await lookUpNow();
    const current = this.registry.webhookSecretOf(live.project);
    if (current !== webhookSecret) {
      // The project's secret was replaced since this process remembered it: only the current one signs.
      this.registry.knownPublicIds.forget(publicId);
      if (!signaturesMatch(requestSignature(current, timestamp ?? '', request.rawBody ?? ''), signature)) {
        throw fail(mismatch());
      }
    }
    return { identity: live, signature };
  }
}

const signatureUsed = (): ApiError =>
  ApiError.unauthorized('Эта подпись уже использована: каждая принимается один раз', 'signature_invalid', undefined, undefined, 'X-Timestamp');

/** The 429 of a poll-marked read: `what` («Один счёт», «Одну выплату») at most once per the configured interval. */
export function pollRefused(retryAfterSeconds: number, what: string, intervalSeconds: number): ApiError {
  const seconds = plural(intervalSeconds, 'секунду', 'секунды', 'секунд');
  return rateLimited(retryAfterSeconds, `${what} можно запрашивать не чаще раза в ${intervalSeconds} ${seconds}: ждите вебхук`);
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
