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

export interface Refund {
  readonly created: RefundCreatedData | null;
  readonly status: RefundStatus;
  readonly completedAt: string | null;
  readonly failureReason: string | null;
}

export const initialRefund = (): Refund => ({ created: null, status: 'pending', completedAt: null, failureReason: null });

export type RefundCommand =
  | { readonly type: 'CreateRefund'; readonly data: RefundCreatedData }
  /** An answered refund whose reservation the ledger refused: created (at its request's time) and failed (at `at`) at once. */
  | { readonly type: 'CreateUnfundedRefund'; readonly data: RefundCreatedData; readonly at: string; readonly reason: string }
  | { readonly type: 'CompleteRefund'; readonly at: string }
  | { readonly type: 'FailRefund'; readonly at: string; readonly reason: string };

export class RefundError extends Error {
  constructor(
    readonly code: 'refund_not_found' | 'conflict',
    message: string,
  ) {
    super(message);
    this.name = 'RefundError';
  }
}

export function decideRefund(command: RefundCommand, s: Refund): RefundEvent[] | RefundError {
  if (command.type === 'CreateRefund') return s.created ? [] : [{ type: 'RefundCreated', data: command.data }];
  if (command.type === 'CreateUnfundedRefund') {
    if (s.created) return [];
    const { refundId, invoiceId, accountId, mode, amount } = command.data;
    return [
      { type: 'RefundCreated', data: command.data },
      { type: 'RefundFailed', data: { refundId, invoiceId, accountId, mode, amount, at: command.at, reason: command.reason } },
    ];
  }
  if (!s.created) return new RefundError('refund_not_found', 'Возврат не найден');
  const { refundId, invoiceId, accountId, mode, amount } = s.created;
  const outcome = { refundId, invoiceId, accountId, mode, amount, at: command.at };
  switch (command.type) {
    case 'CompleteRefund':
      // Failed meanwhile, or completed already: nothing to do.
      return s.status === 'pending' ? [{ type: 'RefundSucceeded', data: outcome }] : [];
    case 'FailRefund':
      if (s.status === 'failed') return [];
      if (s.status === 'succeeded') return new RefundError('conflict', 'Возврат уже выполнен: отклонить его нельзя');
      return [{ type: 'RefundFailed', data: { ...outcome, reason: command.reason } }];
  }
}

export function evolveRefund(s: Refund, event: RefundEvent): Refund {
  switch (event.type) {
    case 'RefundCreated':
      return { ...s, created: event.data, status: 'pending' };
    case 'RefundSucceeded':
      return { ...s, status: 'succeeded', completedAt: event.data.at };
    case 'RefundFailed':
      return { ...s, status: 'failed', completedAt: event.data.at, failureReason: event.data.reason };
  }
}

export const refundDecider = { initialState: initialRefund, evolve: evolveRefund, decide: decideRefund };

export const REFUND_CATEGORY = 'refund';
export const refundStreamName = (refundId: string) => `${REFUND_CATEGORY}-${refundId}`;

/** `rf_` and 24 lower-case letters and digits. */
export const REFUND_ID = /^rf_[0-9a-z]{24}$/;
