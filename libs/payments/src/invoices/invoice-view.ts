import { formatMoney, formatPercent } from '#ledger';
import { customerShareOf, FeePayer, Invoice, InvoiceStatus, isPaid, MethodCode } from '#domain';

/** The spec's Invoice object (GET /invoices/{id}, list items). */
export interface InvoiceView {
  readonly id: string;
  readonly url: string;
  readonly orderId: string;
  readonly status: InvoiceStatus;
  readonly amount: string;
  readonly feePct: string;
  readonly feeAmount: string;
  readonly customerFeePct: string | null;
  readonly customerFeeShare: number;
  readonly customerFeeAmount: string;
  readonly payableAmount: string;
  readonly netAmount: string;
  readonly refundedAmount: string;
  readonly currency: 'RUB';
  readonly method: MethodCode | null;
  readonly feePayer: FeePayer;
  readonly description: string | null;
  readonly customer: Record<string, unknown>;
  readonly customFields: Record<string, unknown> | null;
  readonly isTest: boolean;
  readonly createdAt: string;
  readonly expiresAt: string;
  readonly paidAt: string | null;
  readonly availableAt: string | null;
}

/** The spec's InvoiceCreated (answer of POST /invoices). */
export type InvoiceCreatedView = Pick<
  InvoiceView,
  | 'id'
  | 'url'
  | 'status'
  | 'amount'
  | 'feePct'
  | 'feeAmount'
  | 'customerFeePct'
  | 'customerFeeShare'
  | 'customerFeeAmount'
  | 'payableAmount'
  | 'netAmount'
  | 'feePayer'
  | 'expiresAt'
>;

export const paymentPageUrl = (publicUrl: string, invoiceId: string) => `${publicUrl}/pay/${invoiceId}`;

export function invoiceView(invoice: Invoice, publicUrl: string): InvoiceView {
  const { created, amounts } = invoice;
  const paid = isPaid(invoice) ? invoice : null;
  const methodKnown = invoice.method !== null;
  return {
    id: created.invoiceId,
    url: paymentPageUrl(publicUrl, created.invoiceId),
    orderId: created.orderId,
    status: invoice.status,
    amount: formatMoney(created.amount),
    feePct: formatPercent(amounts.feePct),
    feeAmount: formatMoney(amounts.feeAmount),
    // Null until a method is chosen: until then the amounts are shown at the largest rate.
    customerFeePct: methodKnown ? formatPercent(amounts.customerFeePct) : null,
    customerFeeShare: customerShareOf(amounts.customerFeePct, amounts.feePct),
    customerFeeAmount: formatMoney(amounts.customerFeeAmount),
    payableAmount: formatMoney(amounts.payableAmount),
    netAmount: formatMoney(amounts.netAmount),
    refundedAmount: formatMoney(paid?.refundedAmount ?? 0),
    currency: 'RUB',
    method: invoice.method,
    feePayer: amounts.customerFeePct === 0 ? 'merchant' : 'customer',
    description: created.description,
    customer: { ...created.customer },
    customFields: created.customFields,
    isTest: created.mode === 'test',
    createdAt: created.createdAt,
    expiresAt: created.expiresAt,
    paidAt: paid?.paidAt ?? null,
    availableAt: paid?.availableAt ?? null,
  };
}

export function invoiceCreatedView(view: InvoiceView): InvoiceCreatedView {
  const { id, url, status, amount, feePct, feeAmount, customerFeePct, customerFeeShare, customerFeeAmount, payableAmount, netAmount, feePayer, expiresAt } =
    view;
  return { id, url, status, amount, feePct, feeAmount, customerFeePct, customerFeeShare, customerFeeAmount, payableAmount, netAmount, feePayer, expiresAt };
}
