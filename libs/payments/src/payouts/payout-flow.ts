import type { Pool } from 'pg';
import type { EventStore } from '#event-store';
import { handleCommand, loadState } from '#event-store';
import {
  canonicalPayoutAccount,
  isUsdtMethod,
  maskPayoutAccount,
  Payout,
  PayoutCommand,
  payoutAmounts,
  payoutDecider,
  PayoutEvent,
  PayoutMethod,
  payoutReservationId,
  PayoutRefusal,
  PayoutSource,
  PayoutState,
  payoutStreamName,
  PayoutTerms,
  usdtFor,
} from '#domain';
import type { Kopecks } from '#ledger';
import { formatMoney } from '#ledger';
import type { LedgerBook } from '../ledger';
import type { PayoutAddress, PayoutAddresses } from '../merchants';
import { KeyedRequest, keyedRequestDigest } from '../idempotency/keyed-request';
import { PaymentsError } from '../invoices/invoice-stream';
import { applyPayoutOutcome } from '../flows/outcomes';
import { FlowObserver, tellLeftToRecovery } from '../flows/flow-observer';

/** The spec's Payout object (GET /payouts/{id}, list items, webhook data.payout). */
export interface PayoutView {
  readonly id: number;
  readonly status: string;
  readonly amount: string;
  readonly feeAmount: string;
  readonly netAmount: string;
  readonly currency: 'RUB';
  readonly method: PayoutMethod;
  readonly account: string | null;
  readonly bank: string | null;
  readonly addressId: number | null;
  readonly orderId: string | null;
  readonly comment: string | null;
  readonly usdtAmount: string | null;
  readonly usdtRate: string | null;
  readonly statusReason: string | null;
  readonly externalId: string | null;
  readonly source: PayoutSource;
  readonly createdAt: string;
  readonly processedAt: string | null;
}

export function payoutView(payout: Payout): PayoutView {
  const r = payout.requested;
  return {
    id: r.payoutId,
    // Requested and not yet reserved: shown only once its request was answered (201), as that answer said.
    status: payout.status === 'requested' ? 'pending' : payout.status,
    amount: formatMoney(r.amount),
    feeAmount: formatMoney(r.feeAmount),
    netAmount: formatMoney(r.netAmount),
    currency: 'RUB',
    method: r.method,
    account: maskPayoutAccount(r.method, r.account),
    bank: r.bank,
    addressId: r.addressId,
    orderId: r.orderId,
    comment: r.comment,
    usdtAmount: r.usdtAmount,
    usdtRate: r.usdtRate === null ? null : formatMoney(r.usdtRate),
    statusReason: payout.status === 'rejected' || payout.status === 'cancelled' ? payout.statusReason : null,
    externalId: payout.status === 'paid' ? payout.externalId : null,
    source: r.source,
    createdAt: r.createdAt,
    processedAt: payout.status === 'paid' || payout.status === 'rejected' || payout.status === 'cancelled' ? payout.processedAt : null,
  };
}

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

const REFUSALS: Record<PayoutRefusal, () => PaymentsError> = {
  insufficient_balance: () => new PaymentsError(422, 'insufficient_balance', 'Недостаточно средств на доступном балансе', 'amount'),
  too_many_pending: () =>
    new PaymentsError(409, 'too_many_pending', `Уже ${MAX_UNFINISHED_PAYOUTS} заявки на выплату в обработке: дождитесь завершения одной из них`),
  duplicate_request: () =>
    new PaymentsError(409, 'duplicate_request', 'Такая же выплата (сумма и реквизит) создана меньше минуты назад: для новой заявки укажите orderId'),
};

const notFound = () => new PaymentsError(404, 'not_found', 'Выплата не найдена');

/**
 * Payouts. Creating one runs steps that each decide once and can be run again by
 * anyone: (1) the payout's stream records the request under an integer id (claimed
 * for its orderId first, when there is one); (2) the merchant's live ledger reserves
 * the amount from `available` under the payout rules (at most three unfinished, no
 * duplicate within a minute) or records why not; (3) the payout records the ledger's
 * answer: pending (shown) or refused (never shown, the request answered 409/422).
 * Step 1 is the payout's first commit: once it is written the answer is the payout
 * (201, pending) however steps 2 and 3 fail; a 5xx comes only from a failure before
 * it, when no payout was written. The recovery worker runs `advance` for any payout
 * left at step 1; a refusal it records (the request may have been answered with the
 * payout) rejects the payout, shown, instead.
 */
export class PayoutService {
  constructor(
    private readonly store: EventStore,
    private readonly pool: Pool,
    private readonly ledgers: LedgerBook,
    private readonly addresses: PayoutAddresses,
    private readonly terms: Readonly<Record<PayoutMethod, PayoutTerms>>,
    private readonly usdtRate: UsdtRateSource,
    private readonly observer: FlowObserver = {},
  ) {}

  /**
   * POST /payouts (live keys only: the caller checks the mode). With an orderId, the
   * orderId names the payout. Without one, a keyed request (Idempotency-Key) does: its
   * digest claims one payout id, so running it again (a retry after a crash, or while
   * the first still runs) reaches that payout, created by this request (201).
   */
  async create(
    accountId: string,
    projectId: string,
    request: PayoutRequest,
    now: Date,
    keyed: KeyedRequest | null = null,
  ): Promise<{ created: boolean; payout: Payout }> {
    if (request.orderId !== null) {
      const repeat = await this.repeatOf(accountId, request.orderId, now);
      if (repeat.payout) return { created: false, payout: repeat.payout };
    }
    const requestKey = request.orderId === null && keyed !== null ? keyedRequestDigest('payout', keyed).toString('hex') : null;
    let keyedId: number | null = null;
    if (requestKey !== null) {
      keyedId = await this.payoutIdOfKey(accountId, requestKey);
      if (keyedId !== null) {
        const written = await this.load(keyedId);
        if (written.status !== 'none') return { created: true, payout: await this.answerOf(written, now, 'finishing') };
      }
    }
    const address = await this.resolveAddress(accountId, request);
    const terms = this.terms[address.method];
    if (request.amount < terms.min) {
      throw new PaymentsError(422, 'amount_out_of_range', `Сумма выплаты меньше минимальной (${formatMoney(terms.min)} ₽ для ${address.method})`, 'amount');
    }
    const amounts = payoutAmounts(request.amount, terms);
    const rate = isUsdtMethod(address.method) ? await this.usdtRate.rubPerUsdt() : null;

    let payoutId: number;
    if (requestKey !== null) payoutId = keyedId ?? (await this.claimIdForKey(accountId, requestKey));
    else if (request.orderId === null) payoutId = await this.nextId();
    else {
      const claim = await this.pool.query<{ payout_id: string }>(
        `INSERT INTO payout_order_ids (account_id, order_id, payout_id) VALUES ($1, $2, nextval('payout_ids'))
         ON CONFLICT (account_id, order_id) DO NOTHING RETURNING payout_id`,
        [accountId, request.orderId],
      );
      if (claim.rows[0]) payoutId = Number(claim.rows[0].payout_id);
      else {
        // A concurrent request with this orderId claimed it first: its payout is the answer
        // (or, when that request died before writing it, the id is ours to use).
        const repeat = await this.repeatOf(accountId, request.orderId, now);
        if (repeat.payout) return { created: false, payout: repeat.payout };
        if (repeat.abandonedId === null) return this.create(accountId, projectId, request, now);
        payoutId = repeat.abandonedId;
      }
    }
    const requested = await this.decide(payoutId, {
      type: 'RequestPayout',
      data: {
        payoutId,
        accountId,
        projectId,
        method: address.method,
        addressId: address.id,
        account: address.account,
        bank: address.bank,
        orderId: request.orderId,
        comment: request.comment,
        ...amounts,
        usdtAmount: rate === null ? null : usdtFor(amounts.netAmount, rate),
        usdtRate: rate,
        source: 'api',
        createdAt: now.toISOString(),
      },
    });
    // Written (or found written by an earlier run of this request): the payout exists.
    return { created: true, payout: await this.answerOf(requested.state, now, requested.events.length > 0 ? 'answering' : 'finishing') };
  }

  /**
   * The answer of a request whose payout is written: the payout as the next steps
   * leave it, or the refusal they record; when they fail, the payout as written
   * (pending), left to the recovery worker.
   */
  private async answerOf(written: Payout, now: Date, by: 'answering' | 'finishing'): Promise<Payout> {
    const payoutId = written.requested.payoutId;
    try {
      return await this.advance(payoutId, now, by);
    } catch (error) {
      if (error instanceof PaymentsError) throw error;
      tellLeftToRecovery(this.observer, 'payout', String(payoutId), error);
      return written;
    }
  }

  /**
   * What an orderId already stands for: its payout (taken through the ledger's
   * decision if that is still to come), or the id of a claim whose request died
   * before writing its payout, or nothing (never claimed, or refused and given up).
   */
  private async repeatOf(accountId: string, orderId: string, now: Date): Promise<{ payout: Payout | null; abandonedId: number | null }> {
    for (let attempt = 0; ; attempt++) {
      const claimed = await this.pool.query<{ payout_id: string }>('SELECT payout_id FROM payout_order_ids WHERE account_id = $1 AND order_id = $2', [
        accountId,
        orderId,
      ]);
      if (!claimed.rows[0]) return { payout: null, abandonedId: null };
      const payoutId = Number(claimed.rows[0].payout_id);
      const payout = await this.load(payoutId);
      if (payout.status === 'refused') {
        // Refused: its claim is given up (here too, should the refusing request have died first).
        await this.releaseClaim(accountId, orderId, payoutId);
        continue;
      }
      if (payout.status !== 'none') {
        try {
          return { payout: await this.answerOf(payout, now, 'finishing'), abandonedId: null };
        } catch (error) {
          if (error instanceof PaymentsError && error.code !== 'not_found') continue;
          throw error;
        }
      }
      // Claimed, not yet written: the claiming request is on its way; after a grace period it is taken as dead.
      if (attempt >= 50) return { payout: null, abandonedId: payoutId };
      await new Promise((r) => setTimeout(r, 100));
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
    if (payout.status === 'none') throw notFound();
    if (payout.status === 'refused') throw REFUSALS[payout.refusal]();
    if (payout.status !== 'requested') return payout;
    const r = payout.requested;
    const reservation = await this.ledgers.reserve(
      { accountId: r.accountId, mode: 'live' },
      {
        type: 'ReserveFunds',
        reservationId: payoutReservationId(payoutId),
        purpose: 'payout',
        amount: r.amount,
        at: r.createdAt,
        payout: {
          fingerprint: `${r.amount}|${r.addressId}`,
          duplicateWindowSeconds: r.orderId === null ? DUPLICATE_PAYOUT_WINDOW_SECONDS : null,
          maxUnfinished: MAX_UNFINISHED_PAYOUTS,
        },
      },
    );
    const recorded = await this.run(payoutId, {
      type: 'RecordReservation',
      outcome: reservation.outcome === 'reserved' ? 'reserved' : reservation.refusal,
      at: now.toISOString(),
      mayBeAnswered: by === 'finishing',
    });
    if (recorded.status === 'refused') {
      // The refusal is recorded and is the answer; should freeing the orderId fail, the next request with it frees it (repeatOf).
      if (r.orderId !== null) await this.releaseClaim(r.accountId, r.orderId, payoutId).catch(() => undefined);
      throw REFUSALS[recorded.refusal!]();
    }
    return recorded;
  }

  private async resolveAddress(accountId: string, request: PayoutRequest): Promise<PayoutAddress> {
    let address: PayoutAddress | null;
    if (request.addressId !== undefined) {
      address = await this.addresses.byId(accountId, request.addressId);
      if (address && request.method !== undefined && request.account !== undefined) {
        const same = address.method === request.method && canonicalPayoutAccount(request.method, request.account) === address.account;
        if (!same) throw new PaymentsError(400, 'validation', 'addressId и method + account указывают на разные реквизиты', 'account');
      }
    } else {
      address = await this.addresses.byAccount(accountId, request.method!, request.account!);
    }
    if (!address)
      throw new PaymentsError(404, 'address_not_found', 'Реквизит для выплаты не найден', request.addressId !== undefined ? 'addressId' : 'account');
    if (address.status !== 'confirmed') {
      throw new PaymentsError(422, 'address_not_confirmed', 'Реквизит для выплаты не подтверждён', request.addressId !== undefined ? 'addressId' : 'account');
    }
    return address;
  }

  /** The payout id a keyed request claimed, or null. */
  private async payoutIdOfKey(accountId: string, requestKey: string): Promise<number | null> {
    const r = await this.pool.query<{ payout_id: string }>('SELECT payout_id FROM payout_request_keys WHERE account_id = $1 AND request_key = $2', [
      accountId,
      requestKey,
    ]);
    return r.rows[0] ? Number(r.rows[0].payout_id) : null;
  }

  /** Claims a payout id for a keyed request; a concurrent run of the same request may have claimed it first: that one. */
  private async claimIdForKey(accountId: string, requestKey: string): Promise<number> {
    const claim = await this.pool.query<{ payout_id: string }>(
      `INSERT INTO payout_request_keys (account_id, request_key, payout_id) VALUES ($1, $2, nextval('payout_ids'))
       ON CONFLICT (account_id, request_key) DO NOTHING RETURNING payout_id`,
      [accountId, requestKey],
    );
    if (claim.rows[0]) return Number(claim.rows[0].payout_id);
    return (await this.payoutIdOfKey(accountId, requestKey))!;
  }

  private async releaseClaim(accountId: string, orderId: string, payoutId: number): Promise<void> {
    await this.pool.query('DELETE FROM payout_order_ids WHERE account_id = $1 AND order_id = $2 AND payout_id = $3', [accountId, orderId, payoutId]);
  }

  private async nextId(): Promise<number> {
    const r = await this.pool.query<{ id: string }>(`SELECT nextval('payout_ids') AS id`);
    return Number(r.rows[0]!.id);
  }

  private async load(payoutId: number): Promise<PayoutState> {
    return (await loadState<PayoutState, PayoutEvent>(this.store, payoutStreamName(payoutId), payoutDecider)).state;
  }

  /**
   * The payout if the merchant account may see it (its own, not refused); otherwise 404
   * not_found. A payout requested and not yet reserved is shown (pending): its request
   * may have been answered 201 before the ledger decided.
   */
  async getFor(accountId: string, payoutId: number): Promise<Payout> {
    if (!Number.isSafeInteger(payoutId) || payoutId < 1) throw notFound();
    const payout = await this.load(payoutId);
    if (payout.status === 'none' || payout.status === 'refused' || payout.requested.accountId !== accountId) throw notFound();
    return payout;
  }

  /** GET /payouts?orderId=: the one payout with it, or 404 not_found. */
  async byOrderId(accountId: string, orderId: string): Promise<Payout> {
    const claimed = await this.pool.query<{ payout_id: string }>('SELECT payout_id FROM payout_order_ids WHERE account_id = $1 AND order_id = $2', [
      accountId,
      orderId,
    ]);
    if (!claimed.rows[0]) throw notFound();
    return this.getFor(accountId, Number(claimed.rows[0].payout_id));
  }

  /** An operator transition: 404 for an unknown payout, 409 conflict when illegal from its status. */
  transition(payoutId: number, command: Exclude<PayoutCommand, { type: 'RequestPayout' | 'RecordReservation' }>): Promise<Payout> {
    if (!Number.isSafeInteger(payoutId) || payoutId < 1) return Promise.reject(notFound());
    return this.run(payoutId, command);
  }

  private async run(payoutId: number, command: PayoutCommand): Promise<Payout> {
    return (await this.decide(payoutId, command)).state;
  }

  /** One command on the payout's stream: the state after it and the events it wrote. */
  private async decide(payoutId: number, command: PayoutCommand): Promise<{ readonly state: Payout; readonly events: readonly PayoutEvent[] }> {
    const result = await handleCommand(this.store, payoutStreamName(payoutId), payoutDecider, command);
    if (!result.ok) throw result.failure.code === 'conflict' ? new PaymentsError(409, 'conflict', result.failure.message) : notFound();
    const { state } = result;
    if (state.status === 'none') throw notFound();
    // A finished payout frees its reservation before the answer when it can, so the next
    // request sees the slot and the money at once; the process manager repeats it
    // (idempotently), so a failure here still answers what was recorded.
    try {
      for (const event of result.events) await applyPayoutOutcome(this.ledgers, event);
    } catch (error) {
      tellLeftToRecovery(this.observer, 'payout', String(payoutId), error);
    }
    return { state, events: result.events };
  }
}
