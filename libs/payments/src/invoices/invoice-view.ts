import { formatMoney, formatPercent } from '#ledger';
import { customerShareOf, FeePayer, Invoice, invoiceStatusAt, InvoiceStatus, MethodCode } from '#domain';
import { InvoiceRow, invoiceRowOf } from './invoices.read-model';

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

/**
 * The spec's Invoice of an invoice folded from its stream; with `at`, its status at that
 * instant (an open invoice past its expiresAt is expired: invoiceStatusAt).
 */
export const invoiceView = (invoice: Invoice, publicUrl: string, at?: string): InvoiceView => {
  const view = invoiceRowView(invoiceRowOf(invoice), publicUrl);
  return at === undefined ? view : { ...view, status: invoiceStatusAt(invoice, at) };
};

/** The spec's Invoice of a row of the invoices read model. */
export function invoiceRowView(row: InvoiceRow, publicUrl: string): InvoiceView {
  const { amounts } = row;
  const methodKnown = row.method !== null;
  return {
    id: row.id,
    url: paymentPageUrl(publicUrl, row.id),
    orderId: row.orderId,
    status: row.status,
    amount: formatMoney(row.amount),
    feePct: formatPercent(amounts.feePct),
    feeAmount: formatMoney(amounts.feeAmount),
    // Null until a method is chosen: until then the amounts are shown at the largest rate.
    customerFeePct: methodKnown ? formatPercent(amounts.customerFeePct) : null,
    customerFeeShare: customerShareOf(amounts.customerFeePct, amounts.feePct),
    customerFeeAmount: formatMoney(amounts.customerFeeAmount),
    payableAmount: formatMoney(amounts.payableAmount),
    netAmount: formatMoney(amounts.netAmount),
    refundedAmount: formatMoney(row.refundedAmount),
    currency: 'RUB',
    method: row.method,
    feePayer: amounts.customerFeePct === 0 ? 'merchant' : 'customer',
    description: row.description,
    customer: { ...row.customer },
    customFields: row.customFields,
    isTest: row.mode === 'test',
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
    paidAt: row.paidAt,
    availableAt: row.availableAt,
  };
}

/** A row's Invoice at `at`: an open invoice past its expiresAt is expired (as invoiceView with `at` says), before the expiry worker records it. */
export function invoiceRowViewAt(row: InvoiceRow, publicUrl: string, at: string): InvoiceView {
  const view = invoiceRowView(row, publicUrl);
  const open = row.status === 'created' || row.status === 'pending';
  return open && Date.parse(at) >= Date.parse(row.expiresAt) ? { ...view, status: 'expired' } : view;
}

export function invoiceCreatedView(view: InvoiceView): InvoiceCreatedView {
  const { id, url, status, amount, feePct, feeAmount, customerFeePct, customerFeeShare, customerFeeAmount, payableAmount, netAmount, feePayer, expiresAt } =
    view;
  return { id, url, status, amount, feePct, feeAmount, customerFeePct, customerFeeShare, customerFeeAmount, payableAmount, netAmount, feePayer, expiresAt };
}
