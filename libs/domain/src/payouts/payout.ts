/**
 * A payout: the merchant's withdrawal of available balance to a confirmed payout
 * detail. Pure decisions over its events.
 *
 * requested → pending once the ledger reserved the amount (or → refused, never
 * shown, when it refused: balance, unfinished or duplicate payouts, and the request
 * is answered so; a refusal recorded by anyone else, once the request may have been
 * answered with the payout, rejects it instead, shown with its reason). Then
 * pending → approved → processing → paid; pending, approved or processing →
 * rejected; pending → cancelled. paid, rejected and cancelled are final: paid settles
 * the reservation, rejected and cancelled return it to available.
 */
import { Refusal } from '#ledger';
import type { Kopecks } from '#ledger';
import type { PayoutMethod } from './payout-terms';

export const PAYOUT_STATUSES = ['pending', 'approved', 'processing', 'paid', 'rejected', 'cancelled'] as const;
export type PayoutStatus = (typeof PAYOUT_STATUSES)[number];
/** Where a payout request came from: the merchant API, the dashboard, or an automatic rule. */
export const PAYOUT_SOURCES = ['api', 'manual', 'auto'] as const;
export type PayoutSource = (typeof PAYOUT_SOURCES)[number];
/** The statuses a payout has on its way; only PAYOUT_STATUSES are ever shown. */
export type PayoutLifecycle = 'requested' | 'refused' | PayoutStatus;

/** "In processing" for the limit of three: the payout's money is still reserved. */
export const UNFINISHED_PAYOUT_STATUSES: readonly PayoutStatus[] = ['pending', 'approved', 'processing'];

export type PayoutRefusal = 'insufficient_balance' | 'too_many_pending' | 'duplicate_request';

/** The statusReason of a payout rejected because the ledger refused it after its request may have been answered. */
export const PAYOUT_REFUSAL_REASONS: Readonly<Record<PayoutRefusal, string>> = {
  insufficient_balance: 'Отклонена: недостаточно средств на доступном балансе',
  too_many_pending: 'Отклонена: уже три заявки на выплату в обработке',
  duplicate_request: 'Отклонена: такая же выплата (сумма и реквизит) создана меньше минуты назад',
};

export interface PayoutRequestedData {
  readonly [key: string]: unknown;
  readonly payoutId: number;
  readonly accountId: string;
  readonly projectId: string;
  readonly method: PayoutMethod;
  readonly addressId: number;
  /** The full detail, canonical; shown masked. */
  readonly account: string;
  readonly bank: string | null;
  readonly orderId: string | null;
  readonly comment: string | null;
  readonly amount: Kopecks;
  readonly feeAmount: Kopecks;
  readonly netAmount: Kopecks;
  readonly usdtAmount: string | null;
  /** Kopecks per 1 USDT at creation. */
  readonly usdtRate: Kopecks | null;
  readonly source: PayoutSource;
  readonly createdAt: string;
}

/** Every event after the request names the ledger it moves, so the flows that follow read no other stream. */
interface PayoutRef {
  readonly [key: string]: unknown;
  readonly payoutId: number;
  readonly accountId: string;
  readonly at: string;
}

export type PayoutEvent =
  | { readonly type: 'PayoutRequested'; readonly data: PayoutRequestedData }
  | { readonly type: 'PayoutReserved'; readonly data: PayoutRef }
  | { readonly type: 'PayoutRefused'; readonly data: PayoutRef & { readonly refusal: PayoutRefusal } }
  | { readonly type: 'PayoutApproved'; readonly data: PayoutRef }
  | { readonly type: 'PayoutProcessingStarted'; readonly data: PayoutRef }
  | { readonly type: 'PayoutPaid'; readonly data: PayoutRef & { readonly externalId: string | null; readonly feeAmount: Kopecks } }
  | { readonly type: 'PayoutRejected'; readonly data: PayoutRef & { readonly reason: string } }
  | { readonly type: 'PayoutCancelled'; readonly data: PayoutRef & { readonly reason: string } };

/**
 * A payout, by phase: requested (not yet reserved: not shown), then pending, approved
 * and processing; refused (the ledger refused it before it was ever shown); paid; or
 * rejected or cancelled, with the reason.
 */
export type Payout =
  | { readonly status: 'requested' | 'pending' | 'approved' | 'processing'; readonly requested: PayoutRequestedData }
  | { readonly status: 'refused'; readonly requested: PayoutRequestedData; readonly refusal: PayoutRefusal }
  | { readonly status: 'paid'; readonly requested: PayoutRequestedData; readonly externalId: string | null; readonly processedAt: string }
  | { readonly status: 'rejected' | 'cancelled'; readonly requested: PayoutRequestedData; readonly statusReason: string; readonly processedAt: string };

/** A payout stream's state: no payout yet, or the payout. */
export type PayoutState = { readonly status: 'none' } | Payout;

export const initialPayout = (): PayoutState => ({ status: 'none' });

export type PayoutTransition = 'approve' | 'process' | 'pay' | 'reject' | 'cancel';

export type PayoutCommand =
  | { readonly type: 'RequestPayout'; readonly data: PayoutRequestedData }
  | {
      readonly type: 'RecordReservation';
      readonly outcome: 'reserved' | PayoutRefusal;
      readonly at: string;
      /**
       * The request may have been answered with the payout already (a later step of its
       * request failed, or its process died, and the recovery or a retry records this):
       * a refusal then rejects the payout, shown, instead of refusing it unseen.
       */
      readonly mayBeAnswered?: boolean;
    }
  | { readonly type: 'ApprovePayout'; readonly at: string }
  | { readonly type: 'StartProcessing'; readonly at: string }
  | { readonly type: 'PayPayout'; readonly at: string; readonly externalId: string | null }
  | { readonly type: 'RejectPayout'; readonly at: string; readonly reason: string }
  | { readonly type: 'CancelPayout'; readonly at: string; readonly reason: string };

export type PayoutError = Refusal<'not_found' | 'conflict'>;

/** From which statuses each operator transition is legal. */
export const PAYOUT_TRANSITIONS: Readonly<Record<PayoutTransition, readonly PayoutStatus[]>> = {
  approve: ['pending'],
  process: ['approved'],
  pay: ['processing'],
  reject: ['pending', 'approved', 'processing'],
  cancel: ['pending'],
};

const TRANSITION_OF: Partial<Record<PayoutCommand['type'], PayoutTransition>> = {
  ApprovePayout: 'approve',
  StartProcessing: 'process',
  PayPayout: 'pay',
  RejectPayout: 'reject',
  CancelPayout: 'cancel',
};

/** Visible to the merchant and the operator: reserved at least once. */
export const isShownPayout = (s: PayoutState): s is Payout => s.status !== 'none' && s.status !== 'requested' && s.status !== 'refused';

export function decidePayout(command: PayoutCommand, s: PayoutState): PayoutEvent[] | PayoutError {
  if (command.type === 'RequestPayout') return s.status !== 'none' ? [] : [{ type: 'PayoutRequested', data: command.data }];
  if (s.status === 'none') return new Refusal('not_found', 'Выплата не найдена');
  const ref = { payoutId: s.requested.payoutId, accountId: s.requested.accountId, at: command.at };
  if (command.type === 'RecordReservation') {
    // The ledger decided once; whoever records it first, the answer is the same.
    if (s.status !== 'requested') return [];
    if (command.outcome === 'reserved') return [{ type: 'PayoutReserved', data: ref }];
    if (command.mayBeAnswered) return [{ type: 'PayoutRejected', data: { ...ref, reason: PAYOUT_REFUSAL_REASONS[command.outcome] } }];
    return [{ type: 'PayoutRefused', data: { ...ref, refusal: command.outcome } }];
  }
  // A requested payout is taken through the ledger's decision (PayoutFlow.transition) before any transition reaches it.
  if (!isShownPayout(s)) return new Refusal('not_found', 'Выплата не найдена');
  const transition = TRANSITION_OF[command.type]!;
  if (!(PAYOUT_TRANSITIONS[transition] as readonly string[]).includes(s.status)) {
    return new Refusal('conflict', `Выплата в статусе ${s.status}: переход ${transition} невозможен`);
  }
  switch (command.type) {
    case 'ApprovePayout':
      return [{ type: 'PayoutApproved', data: ref }];
    case 'StartProcessing':
      return [{ type: 'PayoutProcessingStarted', data: ref }];
    case 'PayPayout':
      return [{ type: 'PayoutPaid', data: { ...ref, externalId: command.externalId, feeAmount: s.requested.feeAmount } }];
    case 'RejectPayout':
      return [{ type: 'PayoutRejected', data: { ...ref, reason: command.reason } }];
    case 'CancelPayout':
      return [{ type: 'PayoutCancelled', data: { ...ref, reason: command.reason } }];
  }
}

/** One event folded in; an event that fits no phase the payout is in (decidePayout appends none) leaves it as it is. */
export function evolvePayout(s: PayoutState, event: PayoutEvent): PayoutState {
  if (event.type === 'PayoutRequested') return { status: 'requested', requested: event.data };
  if (s.status === 'none') return s;
  const { requested } = s;
  switch (event.type) {
    case 'PayoutReserved':
      return { status: 'pending', requested };
    case 'PayoutRefused':
      return { status: 'refused', requested, refusal: event.data.refusal };
    case 'PayoutApproved':
      return { status: 'approved', requested };
    case 'PayoutProcessingStarted':
      return { status: 'processing', requested };
    case 'PayoutPaid':
      return { status: 'paid', requested, externalId: event.data.externalId, processedAt: event.data.at };
    case 'PayoutRejected':
      return { status: 'rejected', requested, statusReason: event.data.reason, processedAt: event.data.at };
    case 'PayoutCancelled':
      return { status: 'cancelled', requested, statusReason: event.data.reason, processedAt: event.data.at };
  }
}

export const payoutDecider = { initialState: initialPayout, evolve: evolvePayout, decide: decidePayout };

export const PAYOUT_CATEGORY = 'payout';
export const payoutStreamName = (payoutId: number) => `${PAYOUT_CATEGORY}-${payoutId}`;
/** The id of a payout's reservation in the ledger. */
export const payoutReservationId = (payoutId: number) => `po_${payoutId}`;
/** The payout whose reservation this is (payoutReservationId), or null for another id. */
export const payoutOfReservation = (reservationId: string): number | null => {
  const match = /^po_([1-9][0-9]{0,15})$/.exec(reservationId);
  const payoutId = match ? Number(match[1]) : NaN;
  return Number.isSafeInteger(payoutId) ? payoutId : null;
};
