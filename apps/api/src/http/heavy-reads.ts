import { applyDecorators, CallHandler, ExecutionContext, Inject, Injectable, NestInterceptor, SetMetadata, Type, UseInterceptors } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Observable } from 'rxjs';
import type { MerchantIdentity } from '#payments/merchants';
import type { Clock } from '#platform/clock';
import { rateLimited } from './auth/merchant-auth.guard';
import { readQuery } from './request-pipe';
import { NoTurn, Turns } from './turns';
import { CLOCK_TOKEN, READ_MODEL_REBUILDS } from './tokens';
import { readModelsOf, refuseWhileRebuilt } from './read-models';
import type { ReadModelRebuilds } from '#event-store/projections';

/** Heavy reads answered at once per merchant account in one API process (docs/api.md, "Limits"). */
export const HEAVY_READS_PER_ACCOUNT = 2;
/** How long a heavy read waits for its turn before it is answered 429. */
export const HEAVY_READ_WAIT_SECONDS = 30;
/** Heavy reads of one account that may wait at once; the next is answered 429 at once. */
export const HEAVY_READS_WAITING = 20;

const HEAVY_READ_QUERY = 'heavy-read-query';

/** The heavy reads of this process, per merchant account. */
@Injectable()
export class HeavyReads {
  readonly turns = new Turns({ perKey: HEAVY_READS_PER_ACCOUNT, waitingPerKey: HEAVY_READS_WAITING, waitMs: HEAVY_READ_WAIT_SECONDS * 1000 });
}

const WHY: Record<NoTurn, string> = {
  full: `уже ждут ${HEAVY_READS_WAITING}`,
  waited: `очередь не подошла за ${HEAVY_READ_WAIT_SECONDS} секунд`,
  gone: 'клиент закрыл соединение',
};

/**
 * Marks a heavy read of a merchant route (an export, a page of events, a statement): at
 * most HEAVY_READS_PER_ACCOUNT of one account answered at once in this process, whatever
 * its keys and projects. Goes after MerchantAuthGuard (the account is the key's). `query`:
 * the route's query DTO, read before the turn (Nest runs pipes after interceptors), so a
 * bad query gets its 400 at once instead of after a wait; `check`: the handler's own checks of it (a reversed range,
 * a `to` after the gateway clock's now).
 */
export const HeavyRead = <T extends object>(query: Type<T>, check?: (query: T, now: Date) => unknown) =>
  applyDecorators(SetMetadata(HEAVY_READ_QUERY, { query, check }), UseInterceptors(HeavyReadsInterceptor));

/**
 * Runs after the guards and before the other interceptors of the route: a heavy read takes
 * its account's turn, holding it until its answer has been sent whole or its connection
 * has closed (a streamed CSV included), or waits for one in order of arrival, holding
 * nothing (no database connection); past HEAVY_READS_WAITING waiting or
 * HEAVY_READ_WAIT_SECONDS it gets 429 rate_limited (Retry-After: 1) with nothing read,
 * and a request whose client left while it waited is not served.
 */
@Injectable()
export class HeavyReadsInterceptor implements NestInterceptor {
  constructor(
    private readonly reads: HeavyReads,
    private readonly reflector: Reflector,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(READ_MODEL_REBUILDS) private readonly rebuilds: ReadModelRebuilds,
  ) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const request = context.switchToHttp().getRequest<FastifyRequest & { merchant?: MerchantIdentity }>();
    const response = context.switchToHttp().getResponse<FastifyReply>().raw;
    const accountId = request.merchant?.project.accountId;
    if (accountId === undefined) throw new Error('@HeavyRead() used on a route without MerchantAuthGuard');
    const read = this.reflector.get<{ query: Type<object>; check?: (query: object, now: Date) => unknown } | undefined>(HEAVY_READ_QUERY, context.getHandler());
    if (read !== undefined) {
      const query = await readQuery(read.query, request.query);
      read.check?.(query, this.clock.now());
    }
    // A read model being rebuilt: 503 at once, not after a wait for the turn (@ReadsModels,
    // which runs after this interceptor, looks again once the turn is taken).
    const projections = readModelsOf(this.reflector, context);
    if (projections) await refuseWhileRebuilt(this.rebuilds, projections);
    const socket = request.raw.socket;
    const route = request.routeOptions.url;
    // A client that leaves while it waits (its connection closed: reset, or both sides ended) gives its place up.
    const left = new AbortController();
    const leave = () => left.abort();
    socket.once('close', leave);
    if (socket.destroyed) leave();
    const turn = await this.reads.turns
      .take(accountId, left.signal, () =>
        request.log.info({ accountId, route }, `heavy read: waiting for its turn (${HEAVY_READS_PER_ACCOUNT} per account at a time)`),
      )
      .finally(() => socket.off('close', leave));
    if (typeof turn === 'string') throw busy(turn);
    if (socket.destroyed || response.destroyed) {
      turn();
      throw busy('gone');
    }
    response.once('finish', turn);
    response.once('close', turn);
    // An answer queued behind a pipelined one never gets the socket if the client resets: its response
    // then emits neither event; the request closes all the same (also once its answer is sent).
    request.raw.once('close', turn);
    return next.handle();
  }
}

const busy = (why: NoTurn) =>
  rateLimited(1, `Слишком много тяжёлых запросов аккаунта: не больше ${HEAVY_READS_PER_ACCOUNT} одновременно (${WHY[why]}); повторите запрос позже`);
