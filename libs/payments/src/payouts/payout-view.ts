import type { Payout, PayoutMethod, PayoutSource } from '#domain';
import { formatMoney } from '#ledger';
import { PayoutRow, requestedPayoutRow } from './payouts.read-model';

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

/** The row of a payout folded from its stream by the write side (a single read, a webhook). */
export function payoutRowOf(payout: Payout): PayoutRow {
  const row = requestedPayoutRow(payout.requested);
  switch (payout.status) {
    case 'paid':
      return { ...row, status: payout.status, externalId: payout.externalId, processedAt: payout.processedAt };
    case 'rejected':
    case 'cancelled':
      return { ...row, status: payout.status, statusReason: payout.statusReason, processedAt: payout.processedAt };
    default:
      return { ...row, status: payout.status };
  }
}

/** The spec's Payout of a payout folded from its stream. */
export const payoutView = (payout: Payout): PayoutView => payoutRowView(payoutRowOf(payout));

/** The spec's Payout of a row of the payouts read model. */
export function payoutRowView(row: PayoutRow): PayoutView {
  return {
    id: row.id,
    // Requested and not yet reserved: shown only once its request was answered (201), as that answer said.
    status: row.status === 'requested' ? 'pending' : row.status,
    amount: formatMoney(row.amount),
    feeAmount: formatMoney(row.feeAmount),
    netAmount: formatMoney(row.netAmount),
    currency: 'RUB',
    method: row.method,
    account: row.account,
    bank: row.bank,
    addressId: row.addressId,
    orderId: row.orderId,
    comment: row.comment,
    usdtAmount: row.usdtAmount,
    usdtRate: row.usdtRate === null ? null : formatMoney(row.usdtRate),
    statusReason: row.statusReason,
    externalId: row.externalId,
    source: row.source,
    createdAt: row.createdAt,
    processedAt: row.processedAt,
  };
}
