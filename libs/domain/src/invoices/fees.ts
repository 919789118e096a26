import { Kopecks, MAX_MONEY_KOPECKS, PERCENT_SCALE, PercentRate, percentOf, shareOfRate } from '#ledger';

/** Who pays the fee, in the deprecated feePayer: the whole rate on the buyer (customer) or none (merchant). */
export const FEE_PAYERS = ['merchant', 'customer'] as const;
export type FeePayer = (typeof FEE_PAYERS)[number];

/**
 * How the merchant asked to split the fee with the buyer. `customerFeePct` wins over
 * the deprecated `customerFeeShare`, which wins over the deprecated `feePayer`;
 * without any of them the project's setting applies (by default the whole rate on
 * the buyer).
 */
export type CustomerFeeRequest =
  | { readonly kind: 'pct'; readonly pct: PercentRate }
  | { readonly kind: 'share'; readonly share: number }
  | { readonly kind: 'payer'; readonly payer: FeePayer }
  | { readonly kind: 'project_default'; readonly share: number };

/** The buyer's percent at a given merchant rate (never above the rate). */
export function customerPctAt(request: CustomerFeeRequest, rate: PercentRate): PercentRate {
  switch (request.kind) {
    case 'pct':
      return Math.min(request.pct, rate);
    case 'share':
    case 'project_default':
      return shareOfRate(rate, request.share);
    case 'payer':
      return request.payer === 'customer' ? rate : 0;
  }
}

export interface InvoiceAmounts {
  readonly feePct: PercentRate;
  /** The whole fee of the service: amount × feePct, half-up to the kopeck. */
  readonly feeAmount: Kopecks;
  readonly customerFeePct: PercentRate;
  /** The part of the fee the buyer pays on top: amount × customerFeePct. */
  readonly customerFeeAmount: Kopecks;
  /** What the buyer pays: amount + customerFeeAmount. */
  readonly payableAmount: Kopecks;
  /** What the merchant is credited: amount − (feeAmount − customerFeeAmount). */
  readonly netAmount: Kopecks;
}

/** What the buyer pays at a percent on top: amount + amount × customerFeePct. */
export const payableAmountOf = (amount: Kopecks, customerFeePct: PercentRate): Kopecks => amount + percentOf(amount, customerFeePct);

export function invoiceAmounts(amount: Kopecks, feePct: PercentRate, customerFeePct: PercentRate): InvoiceAmounts {
  if (customerFeePct > feePct) throw new RangeError('the buyer cannot pay more than the whole rate');
  const feeAmount = percentOf(amount, feePct);
  const payableAmount = payableAmountOf(amount, customerFeePct);
  const customerFeeAmount = payableAmount - amount;
  // planInvoice refuses such an amount first (422); here it is a caller's bug.
  if (payableAmount > MAX_MONEY_KOPECKS) throw new RangeError('payable amount above the money maximum');
  return {
    feePct,
    feeAmount,
    customerFeePct,
    customerFeeAmount,
    payableAmount,
    netAmount: amount - (feeAmount - customerFeeAmount),
  };
}

/** The deprecated customerFeeShare of a response: the buyer's part of the rate, in whole percent (half-up). */
export function customerShareOf(customerFeePct: PercentRate, feePct: PercentRate): number {
  if (feePct === 0) return customerFeePct === 0 ? 0 : 100;
  return Math.min(100, Math.floor((customerFeePct * 200 + feePct) / (2 * feePct)));
}

export const PERCENT_100 = 100 * PERCENT_SCALE;
