import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import type { DatedByDecision, EventStore } from '#event-store';
import type { Clock } from '#platform/clock';
import { decidedNow } from '../flows/decided-now';
import { KeyedRequest, keyedRequestDigest } from '../idempotency/keyed-request';
import { handleCommand, loadState } from '#event-store';
import {
  invoiceDecider,
  InvoiceEvent,
  InvoiceState,
  invoiceStreamName,
  isPaid,
  PaidInvoice,
  Refund,
  REFUND_ID,
  RefundCommand,
  refundDecider,
  RefundEvent,
  RefundState,
  refundStreamName,
  Refusal,
} from '#domain';
import { formatMoney } from '#ledger';
import type { LedgerBook } from '../ledger';
import { findInvoice } from '../invoices/invoice-stream';
import { awaitOutcomeMoved } from '../flows/outcomes';
import { afterLedgerDecision, FlowObserver } from '../flows/flow-observer';
import { invoiceOfRefund } from './refunds.read-model';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

const refundIdOf = (bytes: Uint8Array): string => {
  let id = 'rf_';
  for (const b of bytes.subarray(0, 24)) id += ALPHABET[b % 36];
  return id;
};

/** `rf_` and 24 random lower-case letters and digits (about 124 bits). */
export function newRefundId(): string {
  return refundIdOf(randomBytes(24));
}

/**
 * The refund id of a request made under an Idempotency-Key: the same key pair, mode,
 * key and request (path with the invoice, exact body) always name the same refund, so
 * a retry reaches it, even when the first answer was never stored.
 */
export function refundIdFor(request: KeyedRequest): string {
  return refundIdOf(keyedRequestDigest('refund', request));
}

/** The spec's Refund object. */
export interface RefundView {
  readonly id: string;
  readonly invoiceId: string;
  readonly amount: string;
  readonly currency: 'RUB';
  readonly status: Refund['status'];
  readonly createdAt: string;
  readonly completedAt: string | null;
}

export function refundView(refund: Refund): RefundView {
  const c = refund.created;
  return {
    id: c.refundId,
    invoiceId: c.invoiceId,
    amount: formatMoney(c.amount),
    currency: 'RUB',
    status: refund.status,
    createdAt: c.createdAt,
    completedAt: refund.status === 'pending' ? null : refund.completedAt,
  };
}

export const refundNotFound = () => new Refusal('invoice_not_found', 'Возврат не найден');

/**
 * The steps of a refund, over two aggregates and the ledger, each deciding once and
 * runnable again by anyone:
 *  1. the invoice grants the amount from its unrefunded remainder (pending refunds
 *     count), recording the request under the refund's id (the RefundInvoice handler);
 *  2. the merchant's ledger reserves it from `available`, or records that it could not;
 *  3. reserved: the refund's stream is created, pending; refused: the invoice returns
 *     the amount to its remainder.
 * Steps 2 and 3 are `advance`, the one driver of a granted refund: run by the request
 * that was granted, and by the recovery worker for whatever a request left undone.
 * An outcome (`run` of CompleteRefund or FailRefund) is recorded on the refund's stream;
 * the refund_outcomes reactor moves the money and the invoice.
 */
export class RefundFlow {
  constructor(
    private readonly store: EventStore,
    private readonly ledgers: LedgerBook,
    readonly processingSeconds: number,
    private readonly pool: Pool,
    readonly observer: FlowObserver = {},
    /** The gateway clock its commands are dated with when decided (unset: their dates are kept as given). */
    clock?: Clock,
  ) {
    this.dated = clock ? decidedNow(clock) : undefined;
  }

  /** Every command of a refund's stream is dated by its decision (the flow's own time, a worker's, an operator's). */
  private readonly dated: DatedByDecision<RefundCommand> | undefined;

  /**
   * Takes a requested refund as far as it goes: its refund (pending or later), or
   * the Refusal 422 insufficient_balance when the ledger refused it. A refusal is
   * the request's answer only when `by` is 'answering' (the request that was granted,
   * still to answer): the refund is then never shown. Anyone else (the recovery
   * worker, a retry under the same Idempotency-Key) finishes a refund that may have
   * been answered 202 already: refused by the ledger, it is created failed.
   */
  async advance(invoiceId: string, refundId: string, now: Date, by: 'answering' | 'finishing' = 'finishing', read?: InvoiceState): Promise<Refund> {
    // The invoice as the caller just read it (the request that was granted), or from its stream.
    const invoice = read ?? (await loadState<InvoiceState, InvoiceEvent>(this.store, invoiceStreamName(invoiceId), invoiceDecider)).state;
    const asked = isPaid(invoice) ? (invoice.refunds.get(refundId) ?? null) : null;
    if (!asked) throw new Error(`Refund ${refundId} was never requested on invoice ${invoiceId}`);
    const existing = await this.find(refundId);
    if (existing) return existing;
    if (asked.status === 'refused') throw insufficientBalance();

    const created = (invoice as PaidInvoice).created;
    const data = {
      refundId,
      invoiceId,
      projectId: created.projectId,
      accountId: created.accountId,
      mode: created.mode,
      amount: asked.amount,
      // When it was asked for: what a 202 given before this step already said; processed the processing time after it.
      createdAt: asked.requestedAt,
      processAt: new Date(Date.parse(asked.requestedAt) + this.processingSeconds * 1000).toISOString(),
    };
    if (asked.status === 'requested') {
      const ledger = { accountId: created.accountId, mode: created.mode };
      await this.paymentInLedger(invoice as PaidInvoice);
      // The holds due by now that `available` needs, the earliest first, of whichever
      // invoices (this one's too), as a payout releases them: the hold-release worker may lag.
      await this.ledgers.releaseDueHolds(ledger, asked.amount, now.toISOString());
      const reservation = await this.ledgers.reserve(ledger, {
        type: 'ReserveFunds',
        reservationId: refundId,
        purpose: 'refund',
        amount: asked.amount,
        // Dated with its request, whoever reserves it (the request, the recovery, a keyed
        // retry): a 202 already said the money is reserved from then. The ledger dates it
        // no earlier than its latest entry (a release whose money it may take).
        at: asked.requestedAt,
      });
      const decision = { by, refused: reservation.outcome !== 'reserved', flow: 'refund', id: refundId } as const;
      if (!decision.refused) return afterLedgerDecision(decision, this.run(refundId, { type: 'CreateRefund', data }));
      // The invoice records the refusal once, as whoever gets there first says: refused
      // (answered 422, never shown) or failed (a refund that may have been answered).
      const resolved = await afterLedgerDecision(
        decision,
        handleCommand(this.store, invoiceStreamName(invoiceId), invoiceDecider, {
          type: 'ResolveRefund',
          refundId,
          outcome: by === 'answering' ? 'refused' : 'failed',
          at: now.toISOString(),
        }),
      );
      if (!resolved.ok) throw resolved.failure;
      if (isPaid(resolved.state) && resolved.state.refunds.get(refundId)!.status === 'refused') throw insufficientBalance();
    }
    // Failed on the invoice without a refund stream: the ledger refused a refund that may have been answered (its amount
    // back in the invoice's remainder: visible, so a failure now is not "nothing written").
    return afterLedgerDecision(
      { by, refused: true, flow: 'refund', id: refundId, done: 'refused' },
      this.run(refundId, { type: 'CreateUnfundedRefund', data, at: now.toISOString(), reason: 'insufficient_balance' }),
    );
  }

  /**
   * The invoice's payment in its ledger before a refund reserves from it, posted here
   * when the process manager that posts it has not yet (a refund right after the
   * payment). It posts once per cause, so the process manager's post is then a repeat.
   */
  private async paymentInLedger(invoice: PaidInvoice): Promise<void> {
    const { accountId, mode, invoiceId } = invoice.created;
    const { netAmount, feeAmount } = invoice.amounts;
    await this.ledgers.post(
      { accountId, mode },
      { type: 'RecordPayment', invoiceId, netAmount, feeAmount, releaseAt: invoice.availableAt, at: invoice.paidAt },
    );
  }

  /** The refund from its own stream (immediately consistent), or null. */
  async find(refundId: string): Promise<Refund | null> {
    if (!REFUND_ID.test(refundId)) return null;
    const loaded = await loadState<RefundState, RefundEvent>(this.store, refundStreamName(refundId), refundDecider);
    return loaded.state.status === 'none' ? null : loaded.state;
  }

  /**
   * The refund an operator's outcome applies to, its flow finished: from its own stream,
   * or, granted by its invoice and not yet funded (shown pending: its 202 may have been
   * given), taken through the remaining steps first, as the recovery worker would
   * (`advance`, finishing: refused by the ledger, it is created failed). Null: unknown,
   * or refused unseen (answered 422). When finishing cannot happen now (the ledger busy
   * past the statement timeout), the error is thrown and no outcome is written.
   */
  async finished(refundId: string, now: Date): Promise<Refund | null> {
    const found = await this.find(refundId);
    if (found) return found;
    const granted = await this.granted(refundId);
    if (!granted) return null;
    try {
      return await this.advance(granted.created.invoiceId, refundId, now, 'finishing');
    } catch (error) {
      // Refused, and answered so, by the request that was granted meanwhile.
      if (error instanceof Refusal && error.code === 'insufficient_balance') return null;
      throw error;
    }
  }

  /** A refund its invoice granted whose stream is not written yet, or null (none, or refused: answered 422, never shown). */
  async granted(refundId: string): Promise<Refund | null> {
    if (!REFUND_ID.test(refundId)) return null;
    const invoiceId = await invoiceOfRefund(this.pool, refundId);
    const invoice = invoiceId === null ? null : await findInvoice(this.store, invoiceId);
    if (!invoice || !isPaid(invoice) || (invoice.refunds.get(refundId)?.status ?? 'refused') === 'refused') return null;
    return grantedRefund(invoice, refundId, this.processingSeconds);
  }

  /**
   * A command on the refund's stream. An outcome's money and invoice are moved by the
   * refund_outcomes reactor, the one driver of that step; with `awaitMoney` (an operator
   * waiting for the answer) the answer comes once it has, so the next request sees them.
   */
  async run(refundId: string, command: RefundCommand, awaitMoney = false): Promise<Refund> {
    if (!REFUND_ID.test(refundId)) throw refundNotFound();
    const result = await handleCommand(this.store, refundStreamName(refundId), refundDecider, command, { dated: this.dated });
    if (result.ok) {
      if (result.state.status === 'none') throw refundNotFound();
      if (awaitMoney) await awaitOutcomeMoved(this.pool, result, this.observer, 'refund', refundId);
      return result.state;
    }
    if (result.failure.code === 'conflict') throw new Refusal('conflict', result.failure.message);
    throw refundNotFound();
  }
}

/** A refund as its invoice granted it, before its stream is written: pending, as its 202 said. */
export function grantedRefund(invoice: PaidInvoice, refundId: string, processingSeconds: number): Refund {
  const c = invoice.created;
  const asked = invoice.refunds.get(refundId)!;
  return {
    created: {
      refundId,
      invoiceId: c.invoiceId,
      projectId: c.projectId,
      accountId: c.accountId,
      mode: c.mode,
      amount: asked.amount,
      createdAt: asked.requestedAt,
      processAt: new Date(Date.parse(asked.requestedAt) + processingSeconds * 1000).toISOString(),
    },
    status: 'pending',
  };
}

export const insufficientBalance = () => new Refusal('insufficient_balance', 'Недостаточно средств на доступном балансе для возврата');
