import { Inject, Injectable } from '@nestjs/common';
import type { ReadModelRebuilds } from '#event-store/projections';
import { ApiError } from '../http/errors/api-error';
import { refuseWhileRebuilt } from '../http/read-models';
import { READ_MODEL_REBUILDS } from '../http/tokens';
import { Turns } from '../http/turns';

/** Reports built whole in the serving process at once, per process (docs/audit-log.md, "Signed statements"). */
export const REPORT_BUILDS = 2;
/** How long a report waits for its turn before it is answered 503 (Retry-After). */
export const REPORT_WAIT_SECONDS = 30;
/** Reports that may wait for a turn at once, per process; the next is answered 503 at once. */
export const REPORT_QUEUE = 20;
/** How long a report's answer may stall unread (no byte sent on its connection): then it is cut off, and its turn passes on. */
export const REPORT_STALL_SECONDS = 60;
/** How long sending a report's answer may take in all (a year's statement of a big merchant at 120 KB/s): then it is cut off. */
export const REPORT_SEND_SECONDS = 600;

/** The request's log, where a report that waits for its turn says so. */
export interface RequestLog {
  info(fields: object, message: string): void;
}

/** Where a report's answer goes: given back its turn when it has been written whole or its connection has closed. */
export interface ReportResponse {
  readonly writableFinished: boolean;
  readonly destroyed: boolean;
  once(event: 'finish' | 'close', listener: () => void): unknown;
  destroy(): unknown;
  /** Its connection: a timeout there means no byte went either way for that long. */
  readonly socket?: {
    setTimeout(ms: number): unknown;
    on(event: 'timeout', listener: () => void): unknown;
    off(event: 'timeout', listener: () => void): unknown;
  } | null;
}

/**
 * What a report is told of its request: its log, its response (the turn is held until it
 * is sent), whether its client reset the connection, the merchant account asking (none:
 * the operator).
 */
export interface ReportRequest {
  readonly log?: RequestLog;
  readonly merchant?: string;
  /**
   * The request itself: it closes once its answer is sent or its connection is gone, also
   * when the answer was queued behind a pipelined one and never got the socket (its
   * response then emits neither 'finish' nor 'close').
   */
  readonly incoming?: { once(event: 'close', listener: () => void): unknown };
  readonly response?: ReportResponse;
  gone?(): boolean;
}

/** The 503 of a report not built: no turn came (docs/audit-log.md, "Signed statements"). Nothing was written. */
export const notBuilt = (why: string) =>
  new ApiError(503, 'provider_unavailable', `Отчёт не построен: ${why}; повторите запрос позже`, undefined, undefined, {
    'Retry-After': String(REPORT_WAIT_SECONDS),
  });

/**
 * The reports a request builds whole in this process, reading as much as a ledger holds
 * (a signed statement, a balance replayed from the log): at most REPORT_BUILDS at once,
 * one of them a merchant's (its slow readers cannot take every turn), each holding its
 * turn until its answer is sent (a slow reader holds one document, not more; one whose
 * reader stops for REPORT_STALL_SECONDS, or is not done in REPORT_SEND_SECONDS, is cut
 * off); the others wait their turn in order of arrival, at most REPORT_QUEUE of them and
 * REPORT_WAIT_SECONDS each, else 503: a few of them cannot take the process's memory nor
 * its database connections. Other requests never wait for them.
 */
@Injectable()
export class ReportBuilds {
  private readonly turns = new Turns({ size: REPORT_BUILDS, perKey: 1, waiting: REPORT_QUEUE, waitMs: REPORT_WAIT_SECONDS * 1000 });

  constructor(@Inject(READ_MODEL_REBUILDS) private readonly rebuilds: ReadModelRebuilds) {}

  /**
   * `build` in its turn. The read models it reads (`readsModels`) are checked again once
   * the turn has come, just before reading: a rebuild marked while it waited answers the
   * 503 of @ReadsModels. A client that reset its connection while it waited (gone) is not
   * built for; one that only half-closed is (it may still read the answer).
   */
  async inTurn<T>(request: ReportRequest, fields: object, build: () => Promise<T>, readsModels: readonly string[] = []): Promise<T> {
    if (this.turns.full) request.log?.info(fields, `report: waiting for its turn (${REPORT_BUILDS} are built at a time)`);
    else if (this.turns.wouldWait(request.merchant)) request.log?.info(fields, 'report: waiting for its turn (one at a time per merchant)');
    const done = await this.turns.take(request.merchant);
    if (typeof done === 'string') throw notBuilt(`${REPORT_BUILDS} отчёта строятся, очередь занята`);
    let sent = false;
    try {
      if (request.gone?.()) throw notBuilt('клиент закрыл соединение');
      await refuseWhileRebuilt(this.rebuilds, readsModels);
      const built = await build();
      const response = request.response;
      // A client gone while it was built is not waited for (its request may have closed meanwhile, unheard).
      if (response && !response.writableFinished && !response.destroyed && !request.gone?.()) {
        // Nothing else bounds the sending (Node's timeouts cover receiving a request): a reader
        // that stops would hold the turn for good. A slow one that keeps reading is not cut.
        const socket = response.socket ?? null;
        const stalled = () => response.destroy();
        socket?.setTimeout(REPORT_STALL_SECONDS * 1000);
        socket?.on('timeout', stalled);
        // A reader that takes a byte now and then is never stalled: the whole sending is bounded too
        // (the turn given back here as well: a response that never had the socket emits nothing when destroyed).
        const tooLong = setTimeout(() => {
          stalled();
          given();
        }, REPORT_SEND_SECONDS * 1000);
        const given = () => {
          clearTimeout(tooLong);
          // Not setTimeout(0): on 'finish' Node has already put its keep-alive timeout in place of this one.
          socket?.off('timeout', stalled);
          done();
        };
        response.once('finish', given);
        response.once('close', given);
        request.incoming?.once('close', given);
        sent = true;
      }
      return built;
    } finally {
      if (!sent) done();
    }
  }
}
