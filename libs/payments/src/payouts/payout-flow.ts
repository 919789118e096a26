import type { Pool } from 'pg';
import type { DatedByDecision, EventStore, Position } from '#event-store';
import type { Clock } from '#platform/clock';
import { decidedNow } from '../flows/decided-now';
import { handleCommand, loadState, StreamNotFoundError } from '#event-store';
import {
  Payout,
  PayoutCommand,
  payoutDecider,
  PayoutEvent,
  payoutOfReservation,
  PayoutMethod,
  payoutReservationId,
  PayoutRefusal,
  PayoutState,
  payoutStreamName,
  PayoutTerms,
  Refusal,
} from '#domain';
import type { Kopecks, LedgerId } from '#ledger';
import type { LedgerBook } from '../ledger';
import type { PayoutAddresses } from '../merchants';
import { applyPayoutOutcome, awaitOutcomeMoved, PAYOUT_OUTCOME_EVENTS } from '../flows/outcomes';
import { afterLedgerDecision, FlowObserver, RefusalOutcomeUnknownError, tellLeftToRecovery } from '../flows/flow-observer';

/** Where the USDT rate of a payout comes from. */
export interface UsdtRateSource {
  /** Kopecks per 1 USDT now. */
  rubPerUsdt(): Promise<Kopecks>;
}

export class FixedUsdtRate implements UsdtRateSource {
  constructor(private readonly rate: Kopecks) {}
  rubPerUsdt(): Promise<Kopecks> {
    return Promise.resolve(this.rate);
  }
}

export interface PayoutRequest {
  readonly amount: Kopecks;
  /** Either the id of a payout detail... */
  readonly addressId?: number;
  /** ...or its method and full account. */
  readonly method?: PayoutMethod;
  readonly account?: string;
  readonly orderId: string | null;
  readonly comment: string | null;
}

/** The spec's limits on payouts. */
export const MAX_UNFINISHED_PAYOUTS = 3;
export const DUPLICATE_PAYOUT_WINDOW_SECONDS = 60;

export const REFUSALS: Record<PayoutRefusal, () => Refusal> = {
  insufficient_balance: () => new Refusal('insufficient_balance', 'Недостаточно средств на доступном балансе', 'amount'),
  too_many_pending: () => new Refusal('too_many_pending', `Уже ${MAX_UNFINISHED_PAYOUTS} заявки на выплату в обработке: дождитесь завершения одной из них`),
  duplicate_request: () =>
    new Refusal('duplicate_request', 'Такая же выплата (сумма и реквизит) создана меньше минуты назад: для новой заявки укажите orderId'),
};

export const payoutNotFound = () => new Refusal('not_found', 'Выплата не найдена');

/**
 * The steps of a payout, each deciding once and runnable again by anyone: (1) the
 * payout's stream records the request under an integer id (the CreatePayout handler,
 * which claims the id for its orderId or Idempotency-Key first); (2) the merchant's live
 * ledger reserves the amount from `available` under the payout rules (at most three
 * unfinished, no duplicate within a minute) or records why not; (3) the payout records
 * the ledger's answer: pending (shown) or refused (never shown, the request answered
 * 409/422). Steps 2 and 3 are `advance`, the one driver of a requested payout: run by
 * the request that wrote it, by the recovery worker for any payout left at step 1, and
 * by whoever is about to show one still at step 1 (`decided`: a GET, an operator
 * transition); a refusal any of those records (the request may have been answered with
 * the payout) rejects the payout, shown, instead. `decide` runs one command on the
 * payout's stream; the payout_outcomes reactor moves a finished payout's reservation.
 */
export class PayoutFlow {
  constructor(
    private readonly store: EventStore,
    readonly pool: Pool,
    private readonly ledgers: LedgerBook,
    readonly addresses: PayoutAddresses,
    readonly terms: Readonly<Record<PayoutMethod, PayoutTerms>>,
    readonly usdtRate: UsdtRateSource,
    private readonly observer: FlowObserver = {},
    /** The gateway clock its commands are dated with when decided (unset: their dates are kept as given). */
    clock?: Clock,
  ) {
    this.dated = clock ? payoutCommandsDated(clock) : undefined;
  }

  /** Every command of a payout's stream is dated by its decision (a request's `createdAt`, an operator's or the flow's `at`). */
  private readonly dated: DatedByDecision<PayoutCommand> | undefined;

  /**
   * The answer of a request whose payout is written: the payout as the next steps
   * leave it, or the refusal they record. When they fail, what the payout's stream holds
   * decides: a refusal recorded before the failure (its answer lost) is the answer; a
   * payout past the ledger's decision is answered as it is; one still requested is,
   * for the run that wrote it, answered as written (pending) and left to the recovery
   * worker, which shows any refusal it meets. A repeat (by orderId or key) never answers
   * a payout still requested: the run that wrote it may yet refuse it unseen, so the
   * repeat fails (5xx; the marked StepsCutShortError when it made the reservation) and
   * is sent again.
   */
  async answerOf(written: Payout, now: Date, by: 'answering' | 'finishing'): Promise<Payout> {
    const payoutId = written.requested.payoutId;
    try {
      return await this.advance(payoutId, now, by);
    } catch (error) {
      if (error instanceof Refusal) throw error;
      const recorded = await this.load(payoutId).catch(() => null);
      if (recorded?.status === 'refused') throw REFUSALS[recorded.refusal]();
      if (recorded !== null && recorded.status !== 'none' && recorded.status !== 'requested') return recorded;
      // Still requested (or unreadable) after a refusal whose recording may yet commit (its server process not
      // known to have ended): never shown then, so not "pending" but the marked 503.
      if (by === 'finishing' || error instanceof RefusalOutcomeUnknownError) throw error;
      tellLeftToRecovery(this.observer, 'payout', String(payoutId), error);
      return written;
    }
  }

  /**
   * Takes a requested payout through the ledger's decision: the payout (pending or
   * later), or its refusal. A refusal is the request's answer only when `by` is
   * 'answering' (the run that wrote the payout, still to answer); anyone else (the
   * recovery worker, a retry by orderId or Idempotency-Key) may be finishing a payout
   * already answered 201, so a refusal rejects it, shown, with its reason.
   */
  async advance(payoutId: number, now: Date, by: 'answering' | 'finishing' = 'finishing'): Promise<Payout> {
    const payout = await this.load(payoutId);
    if (payout.status === 'none') throw payoutNotFound();
    if (payout.status === 'refused') throw REFUSALS[payout.refusal]();
    if (payout.status !== 'requested') return payout;
    const r = payout.requested;
    const ledger: LedgerId = { accountId: r.accountId, mode: 'live' };
    // Money is available from its payment's availableAt, not from the hold-release worker's
    // next tick: the holds due by now that the amount needs are released first, the earliest
    // first, together (LedgerBook.releaseDueHolds); the worker's own release is then a repeat.
    await this.ledgers.releaseDueHolds(ledger, r.amount, now.toISOString());
    const reservation = await this.ledgers.reserve(
      ledger,
      {
        type: 'ReserveFunds',
        reservationId: payoutReservationId(payoutId),
        purpose: 'payout',
        amount: r.amount,
        // Dated with its request; the ledger dates it no earlier than its latest entry (a release whose money it may take).
        at: r.createdAt,
        payout: {
          fingerprint: `${r.amount}|${r.addressId}`,
          duplicateWindowSeconds: r.orderId === null ? DUPLICATE_PAYOUT_WINDOW_SECONDS : null,
          maxUnfinished: MAX_UNFINISHED_PAYOUTS,
        },
      },
      (reservationIds) => this.moveFinishedOutcomes(reservationIds),
    );
    const recording = this.run(payoutId, {
      type: 'RecordReservation',
      outcome: reservation.outcome === 'reserved' ? 'reserved' : reservation.refusal,
      at: now.toISOString(),
      mayBeAnswered: by === 'finishing',
    });
    const recorded = await afterLedgerDecision({ by, refused: reservation.outcome !== 'reserved', flow: 'payout', id: String(payoutId) }, recording);
    if (recorded.status === 'refused') {
      // The refusal is recorded and is the answer; should freeing the orderId fail, the next request with it frees it (repeatOf).
      if (r.orderId !== null) await this.releaseClaim(r.accountId, r.orderId, payoutId).catch(() => undefined);
      throw REFUSALS[recorded.refusal!]();
    }
    return recorded;
  }

  /**
   * A payout finished in its own stream (paid, rejected, cancelled) is no longer
   * unfinished, whether or not the payout_outcomes reactor has moved its reservation
   * yet (it may trail the log: operations.md, "When the visible event log trails").
   * When the ledger would refuse a payout as too_many_pending, the payouts of its open
   * reservations are read and each finished one's outcome is moved here as the reactor
   * does (applyPayoutOutcome: the same ledger command and cause, so the reactor later
   * finds it done). Answers how many it moved.
   */
  private async moveFinishedOutcomes(reservationIds: readonly string[]): Promise<number> {
    const moved = await Promise.all(
      reservationIds.map(async (reservationId) => {
        const payoutId = payoutOfReservation(reservationId);
        if (payoutId === null) return false;
        const events = await this.store.readStream(payoutStreamName(payoutId)).catch((error: unknown) => {
          if (error instanceof StreamNotFoundError) return [];
          throw error;
        });
        const outcome = events.find((e) => (PAYOUT_OUTCOME_EVENTS as readonly string[]).includes(e.type));
        if (outcome === undefined) return false;
        await applyPayoutOutcome(this.ledgers, { type: outcome.type, data: outcome.data } as unknown as PayoutEvent);
        return true;
      }),
    );
    return moved.filter(Boolean).length;
  }

  async releaseClaim(accountId: string, orderId: string, payoutId: number): Promise<void> {
    await this.pool.query('DELETE FROM payout_order_ids WHERE account_id = $1 AND order_id = $2 AND payout_id = $3', [accountId, orderId, payoutId]);
  }

  async load(payoutId: number): Promise<PayoutState> {
    return (await loadState<PayoutState, PayoutEvent>(this.store, payoutStreamName(payoutId), payoutDecider)).state;
  }

  /**
   * The payout as it may be shown (GET by id or orderId, an operator transition): one
   * still requested (its 201 may have been given) is first taken through the ledger's
   * decision, as the recovery worker would (`advance`, finishing: a refusal rejects it,
   * shown, with its reason), so that a payout once shown is never refused unseen
   * afterwards. 404 not_found: unknown, another account's (`accountId` given), or
   * refused before it was ever shown (its request answered so). When the decision cannot
   * be had now (the ledger busy past the statement timeout), its error is thrown (503,
   * marked when the reservation was made: StepsCutShortError).
   */
  async decided(payoutId: number, now: Date, accountId?: string): Promise<Payout> {
    if (!Number.isSafeInteger(payoutId) || payoutId < 1) throw payoutNotFound();
    const payout = await this.load(payoutId);
    if (payout.status === 'none' || payout.status === 'refused') throw payoutNotFound();
    if (accountId !== undefined && payout.requested.accountId !== accountId) throw payoutNotFound();
    if (payout.status !== 'requested') return payout;
    try {
      return await this.advance(payoutId, now, 'finishing');
    } catch (error) {
      // Refused meanwhile by the request that wrote it, which answers so: never shown.
      if (error instanceof Refusal) throw payoutNotFound();
      throw error;
    }
  }

  /**
   * An operator transition: 404 for an unknown payout, 409 conflict when illegal from its
   * status. The payout is first `decided` (one still requested gets the ledger's
   * decision; the ledger busy: 503 and the transition is not written). A finished
   * payout's reservation is moved by the payout_outcomes reactor (or first by a new
   * payout that the limit would otherwise refuse: moveFinishedOutcomes); the answer comes
   * once the reactor has moved it, so the next request sees the slot and the money.
   */
  async transition(payoutId: number, command: Exclude<PayoutCommand, { type: 'RequestPayout' | 'RecordReservation' }>): Promise<Payout> {
    await this.decided(payoutId, new Date(command.at));
    const decided = await this.decide(payoutId, command);
    await awaitOutcomeMoved(this.pool, decided, this.observer, 'payout', String(payoutId));
    return decided.state;
  }

  private async run(payoutId: number, command: PayoutCommand): Promise<Payout> {
    return (await this.decide(payoutId, command)).state;
  }

  /** One command on the payout's stream: the state after it, the events it wrote and the position of the last (null: none). */
  async decide(
    payoutId: number,
    command: PayoutCommand,
  ): Promise<{ readonly state: Payout; readonly events: readonly PayoutEvent[]; readonly position: Position | null }> {
    const result = await handleCommand(this.store, payoutStreamName(payoutId), payoutDecider, command, { dated: this.dated });
    if (!result.ok) throw result.failure.code === 'conflict' ? new Refusal('conflict', result.failure.message) : payoutNotFound();
    const { state } = result;
    if (state.status === 'none') throw payoutNotFound();
    return { state, events: result.events, position: result.position };
  }
}

/** A payout's commands dated by their decision: a request by its `createdAt`, every other by its `at`. */
function payoutCommandsDated(clock: Clock): DatedByDecision<PayoutCommand> {
  const byAt = decidedNow<PayoutCommand>(clock);
  return {
    ...byAt,
    at: (command) => (command.type === 'RequestPayout' ? command.data.createdAt : byAt.at(command)),
    redate: (command, at) => (command.type === 'RequestPayout' ? { ...command, data: { ...command.data, createdAt: at } } : byAt.redate(command, at)),
  };
}
