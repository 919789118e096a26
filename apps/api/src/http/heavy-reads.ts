import { applyDecorators, CallHandler, ExecutionContext, Injectable, NestInterceptor, UseInterceptors } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Observable } from 'rxjs';
import type { MerchantIdentity } from '#payments/merchants';
import { rateLimited } from './auth/merchant-auth.guard';

/** Heavy reads answered at once per merchant account in one API process (docs/api.md, "Limits"). */
export const HEAVY_READS_PER_ACCOUNT = 2;
/** How long a heavy read waits for its turn before it is answered 429. */
export const HEAVY_READ_WAIT_SECONDS = 30;
/** Heavy reads of one account that may wait at once; the next is answered 429 at once. */
export const HEAVY_READS_WAITING = 20;

/** The client's connection, as far as a wait needs it: closed (reset, or both sides ended) means gone. */
export interface ClientConnection {
  readonly destroyed: boolean;
  once(event: 'close', listener: () => void): unknown;
  off(event: 'close', listener: () => void): unknown;
}

/** No turn: the line was full, the wait ran out, or the client left while it waited. */
export type NoTurn = 'full' | 'waited' | 'gone';

interface Line {
  busy: number;
  readonly waiting: ((outcome: 'turn' | NoTurn) => void)[];
}

/**
 * Per key (a merchant account): at most `size` holders at once; the others wait in order
 * of arrival, at most `queue` of them, each at most `waitMs`, and one whose client leaves
 * gives its place up. A turn is given back by calling what `take` answered (once; a second
 * call does nothing). A key with no holder and nobody waiting has no entry.
 */
export class AccountTurns {
  private readonly lines = new Map<string, Line>();

  constructor(
    private readonly size: number,
    private readonly queue: number,
    private readonly waitMs: number,
  ) {}

  /** Keys with a holder or a waiter (the others are forgotten). */
  get accounts(): number {
    return this.lines.size;
  }

  /** `waits` is called when the turn is not free at once and the request will wait for it. */
  async take(key: string, client: ClientConnection, waits: () => void = () => undefined): Promise<(() => void) | NoTurn> {
    let line = this.lines.get(key);
    if (!line) this.lines.set(key, (line = { busy: 0, waiting: [] }));
    const own = line;
    if (own.busy < this.size) own.busy++;
    else {
      // The line has a holder here, so it stays in the map whatever this request gets.
      if (own.waiting.length >= this.queue) return 'full';
      if (client.destroyed) return 'gone';
      waits();
      const outcome = await new Promise<'turn' | NoTurn>((resolve) => {
        const end = (outcome: 'turn' | NoTurn) => {
          clearTimeout(timer);
          client.off('close', left);
          const at = own.waiting.indexOf(end);
          if (at >= 0) own.waiting.splice(at, 1);
          resolve(outcome);
        };
        const left = () => end('gone');
        const timer = setTimeout(() => end('waited'), this.waitMs);
        client.once('close', left);
        own.waiting.push(end);
      });
      if (outcome !== 'turn') return outcome;
    }
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = own.waiting.shift();
      if (next)
        next('turn'); // the turn passes on with `busy` unchanged
      else if (--own.busy === 0) this.lines.delete(key);
    };
  }
}

/** The heavy reads of this process, per merchant account. */
@Injectable()
export class HeavyReads {
  readonly turns = new AccountTurns(HEAVY_READS_PER_ACCOUNT, HEAVY_READS_WAITING, HEAVY_READ_WAIT_SECONDS * 1000);
}

const WHY: Record<NoTurn, string> = {
  full: `уже ждут ${HEAVY_READS_WAITING}`,
  waited: `очередь не подошла за ${HEAVY_READ_WAIT_SECONDS} секунд`,
  gone: 'клиент закрыл соединение',
};

/**
 * Marks a heavy read of a merchant route (an export, a page of events, a statement): at
 * most HEAVY_READS_PER_ACCOUNT of one account answered at once in this process, whatever
 * its keys and projects. Goes after MerchantAuthGuard (the account is the key's).
 */
export const HeavyRead = () => applyDecorators(UseInterceptors(HeavyReadsInterceptor));

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
  constructor(private readonly reads: HeavyReads) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const request = context.switchToHttp().getRequest<FastifyRequest & { merchant?: MerchantIdentity }>();
    const response = context.switchToHttp().getResponse<FastifyReply>().raw;
    const accountId = request.merchant?.project.accountId;
    if (accountId === undefined) throw new Error('@HeavyRead() used on a route without MerchantAuthGuard');
    const socket = request.raw.socket;
    const route = request.routeOptions.url;
    const turn = await this.reads.turns.take(accountId, socket, () =>
      request.log.info({ accountId, route }, `heavy read: waiting for its turn (${HEAVY_READS_PER_ACCOUNT} per account at a time)`),
    );
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
