/**
 * A refund of (part of) a paid invoice: pure decisions over its events.
 *
 * Its stream exists once the invoice granted the amount and the merchant's ledger
 * reserved it: pending → succeeded (the refund processor: the bank paid the buyer) or
 * pending → failed (the bank refused it; the operator API stands in for that answer).
 * Both are final. One refund exists without a reservation: one the API answered (202)
 * before the ledger decided, which the ledger then refused; it is created failed
 * (`CreateUnfundedRefund`), so the merchant learns its end like any other.
 */
import { Refusal } from '#ledger';
import type { Kopecks } from '#ledger';
import type { Mode } from '../invoices/invoice';

export const REFUND_STATUSES = ['pending', 'succeeded', 'failed'] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

export interface RefundCreatedData {
  readonly [key: string]: unknown;
  readonly refundId: string;
  readonly invoiceId: string;
  readonly projectId: string;
  readonly accountId: string;
  readonly mode: Mode;
  readonly amount: Kopecks;
  readonly createdAt: string;
  /** When the sandbox processor completes it unless it failed before. */
  readonly processAt: string;
}

export type RefundEvent =
  | { readonly type: 'RefundCreated'; readonly data: RefundCreatedData }
  | { readonly type: 'RefundSucceeded'; readonly data: RefundOutcomeData }
  | { readonly type: 'RefundFailed'; readonly data: RefundOutcomeData & { readonly reason: string } };

/** Outcomes carry what the ledger and the invoice need, so the flows that follow read no other stream. */
export interface RefundOutcomeData {
  readonly [key: string]: unknown;
  readonly refundId: string;
  readonly invoiceId: string;
  readonly accountId: string;
  readonly mode: Mode;
  readonly amount: Kopecks;
  readonly at: string;
}

/** A refund: pending, then succeeded or failed (final). */
export type Refund =
  | { readonly status: 'pending'; readonly created: RefundCreatedData }
  | { readonly status: 'succeeded'; readonly created: RefundCreatedData; readonly completedAt: string }
  | { readonly status: 'failed'; readonly created: RefundCreatedData; readonly completedAt: string; readonly failureReason: string };

/** A refund stream's state: no refund yet, or the refund. */
export type RefundState = { readonly status: 'none' } | Refund;

export const initialRefund = (): RefundState => ({ status: 'none' });

export type RefundCommand =
  | { readonly type: 'CreateRefund'; readonly data: RefundCreatedData }
  /** An answered refund whose reservation the ledger refused: created (at its request's time) and failed (at `at`) at once. */
  | { readonly type: 'CreateUnfundedRefund'; readonly data: RefundCreatedData; readonly at: string; readonly reason: string }
  | { readonly type: 'CompleteRefund'; readonly at: string }
  | { readonly type: 'FailRefund'; readonly at: string; readonly reason: string };

export type RefundError = Refusal<'refund_not_found' | 'conflict'>;

export function decideRefund(command: RefundCommand, s: RefundState): RefundEvent[] | RefundError {
  if (command.type === 'CreateRefund') return s.status !== 'none' ? [] : [{ type: 'RefundCreated', data: command.data }];
  if (command.type === 'CreateUnfundedRefund') {
    if (s.status !== 'none') return [];
    const { refundId, invoiceId, accountId, mode, amount } = command.data;
    return [
      { type: 'RefundCreated', data: command.data },
      { type: 'RefundFailed', data: { refundId, invoiceId, accountId, mode, amount, at: command.at, reason: command.reason } },
    ];
  }
  if (s.status === 'none') return new Refusal('refund_not_found', 'Возврат не найден');
  const { refundId, invoiceId, accountId, mode, amount } = s.created;
  const outcome = { refundId, invoiceId, accountId, mode, amount, at: command.at };
  switch (command.type) {
    case 'CompleteRefund':
      // Failed meanwhile, or completed already: nothing to do.
      return s.status === 'pending' ? [{ type: 'RefundSucceeded', data: outcome }] : [];
    case 'FailRefund':
      if (s.status === 'failed') return [];
      if (s.status === 'succeeded') return new Refusal('conflict', 'Возврат уже выполнен: отклонить его нельзя');
      return [{ type: 'RefundFailed', data: { ...outcome, reason: command.reason } }];
  }
}

/** One event folded in: created starts the refund; an outcome ends a pending one (it fits no other phase). */
export function evolveRefund(s: RefundState, event: RefundEvent): RefundState {
  switch (event.type) {
    case 'RefundCreated':
      return { status: 'pending', created: event.data };
    case 'RefundSucceeded':
      return s.status === 'pending' ? { status: 'succeeded', created: s.created, completedAt: event.data.at } : s;
    case 'RefundFailed':
      return s.status === 'pending' ? { status: 'failed', created: s.created, completedAt: event.data.at, failureReason: event.data.reason } : s;
  }
}

export const refundDecider = { initialState: initialRefund, evolve: evolveRefund, decide: decideRefund };

export const REFUND_CATEGORY = 'refund';
export const refundStreamName = (refundId: string) => `${REFUND_CATEGORY}-${refundId}`;

/** `rf_` and 24 lower-case letters and digits. */
export const REFUND_ID = /^rf_[0-9a-z]{24}$/;
