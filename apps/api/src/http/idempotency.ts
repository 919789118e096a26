import { CanActivate, createParamDecorator, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { IdempotencyKeys, KeyedRequest } from '#payments/idempotency';
import { IDEMPOTENCY_KEY_HEADER, readIdempotencyKey, requestFingerprint } from '#payments/idempotency';
import type { IdempotencyKeyReading } from '#payments/idempotency';
import type { Logger } from '#platform/logging';
import type { MerchantIdentity } from '#payments/merchants';
import { ApiError } from './errors/api-error';
import { IDEMPOTENCY_KEYS } from './tokens';

/** A keyed request that runs: what it is, and its hold on the key. */
interface RunningKey {
  readonly request: KeyedRequest;
  readonly claim: string;
  /** The key was claimed before (a run that died or answered 5xx): that run may have written. */
  readonly takenOver: boolean;
}

type KeyedFastifyRequest = FastifyRequest & { merchant?: MerchantIdentity; rawBody?: Buffer; idempotency?: RunningKey; nothingWritten?: true };

/** Said by the error filter of a 5xx whose kind means that nothing was written (wroteNothing). */
export function markNothingWritten(request: FastifyRequest): void {
  (request as KeyedFastifyRequest).nothingWritten = true;
}

/** Sent with an answer that is the stored first answer of its Idempotency-Key. */
export const IDEMPOTENT_REPLAY_HEADER = 'idempotent-replayed';

/** The stored first answer of a key, sent again as it was (the error filter sends it). */
export class StoredAnswer {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {}

  send(reply: FastifyReply): void {
    void reply.status(this.status).header('content-type', 'application/json; charset=utf-8').header(IDEMPOTENT_REPLAY_HEADER, 'true').send(this.body);
  }
}

/** Every occurrence of the header, from the raw header list (Node joins repeats of unknown headers with a comma). */
function headerValues(request: FastifyRequest): string[] {
  const raw = request.raw.rawHeaders;
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === IDEMPOTENCY_KEY_HEADER) values.push(raw[i + 1]!);
  return values;
}

/**
 * `Idempotency-Key` on a merchant POST, a guard of the route after MerchantAuthGuard
 * (Nest runs the controller's guards, then the route's, then the pipes): the same key
 * with the same request answers the first answer again; with another request, 409
 * idempotency_key_conflict; while the first still runs, the repeat waits for its
 * answer. The answer itself is stored by the onSend hook (registerIdempotencyHook),
 * which sees every answer, the error filter's included. Without the header nothing
 * changes, and nothing is awaited. (A guard rather than an interceptor: a route
 * without interceptors skips Nest's interceptor pipeline.)
 */
@Injectable()
export class IdempotencyGuard implements CanActivate {
  constructor(@Inject(IDEMPOTENCY_KEYS) private readonly keys: IdempotencyKeys) {}

  canActivate(context: ExecutionContext): true | Promise<true> {
    const request = context.switchToHttp().getRequest<KeyedFastifyRequest>();
    const reading = readIdempotencyKey(headerValues(request));
    if (reading.kind === 'absent') return true;
    return this.admit(request, reading).then(() => true);
  }

  private async admit(request: KeyedFastifyRequest, reading: Exclude<IdempotencyKeyReading, { kind: 'absent' }>): Promise<void> {
    if (reading.kind === 'invalid') {
      throw ApiError.validation([{ param: 'Idempotency-Key', code: 'invalid_idempotency_key', message: `Idempotency-Key: ${reading.reason}` }]);
    }
    const merchant = request.merchant;
    if (!merchant) throw new Error('IdempotencyGuard used on a route without MerchantAuthGuard');
    const keyed: KeyedRequest = {
      keyId: merchant.keyId,
      projectId: merchant.project.id,
      mode: merchant.mode,
      key: reading.key,
      fingerprint: requestFingerprint(request.method, request.url, request.rawBody),
    };
    const admission = await this.keys.admit(keyed);
    switch (admission.kind) {
      case 'run':
        // The keyed steps are named by the key's first pair: a retry under a rotated pair reaches the same refund or payout.
        request.idempotency = { request: { ...keyed, keyId: admission.keyId }, claim: admission.claim, takenOver: admission.takenOver };
        return;
      case 'replay':
        throw new StoredAnswer(admission.status, admission.body);
      case 'conflict':
        throw new ApiError(
          409,
          'idempotency_key_conflict',
          'Этот Idempotency-Key уже использован с другим запросом (метод, адрес или тело): для нового запроса нужен новый ключ',
          'Idempotency-Key',
        );
      case 'busy':
        throw new ApiError(
          409,
          'idempotency_key_in_use',
          'Запрос с этим Idempotency-Key ещё выполняется: повторите его позже, ответ будет тем же',
          'Idempotency-Key',
          undefined,
          { 'Retry-After': '1' },
        );
    }
  }
}

/** The keyed request a handler runs (its Idempotency-Key), or null without the header. */
export const Keyed = createParamDecorator(
  (_: unknown, context: ExecutionContext): KeyedRequest | null => context.switchToHttp().getRequest<KeyedFastifyRequest>().idempotency?.request ?? null,
);

/**
 * Stores the answer of every keyed request that ran, before it is sent, and stops
 * renewing its lease: a 2xx or 4xx becomes the key's answer (if another run of the key
 * stored one first, that one is sent instead); a 5xx lets the key go when it was claimed fresh and
 * its error is known to have written nothing, else ends its lease (the row stays), so a retry can succeed. Should storing fail, the answer still goes out and the key stays held until
 * its lease runs out: the retry then runs the keyed steps again, which reach the same result.
 */
export function registerIdempotencyHook(fastify: FastifyInstance, keys: IdempotencyKeys, log: Logger): void {
  // A callback hook: an answer without a running key goes on at once, no promise made.
  fastify.addHook('onSend', (request: KeyedFastifyRequest, reply, payload, done) => {
    const running = request.idempotency;
    if (!running) return done(null, payload);
    request.idempotency = undefined;
    void storeAnswer(keys, running, request, reply, payload, log).then((sent) => done(null, sent));
  });
}

/** A keyed request's answer stored as its key's answer (or the key let go); answers what to send. Never rejects. */
async function storeAnswer(
  keys: IdempotencyKeys,
  running: RunningKey,
  request: KeyedFastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  log: Logger,
): Promise<unknown> {
  try {
    if (reply.statusCode >= 500 || typeof payload !== 'string') {
      // A first run whose 5xx is known to have written nothing (docs/api.md, "Commit points") leaves nothing under the key.
      const nothingWritten = reply.statusCode >= 500 && !running.takenOver && request.nothingWritten === true;
      await keys.abandon(running.request, running.claim, nothingWritten);
      return payload;
    }
    const first = await keys.complete(running.request, reply.statusCode, payload);
    if (first === null) return payload;
    void reply.status(first.status).header(IDEMPOTENT_REPLAY_HEADER, 'true');
    return first.body;
  } catch (error) {
    (request.log ?? log).warn({ err: error }, 'idempotency key answer not stored');
    return payload;
  } finally {
    // Only once the answer is stored (or the key let go): a store that waits must not let a repeat in.
    keys.stopRenewing(running.claim);
  }
}
