import type { InvoiceRequest } from '#domain';

/** A CreateInvoice request by SBP with nothing optional set: `amount` and `orderId`, and whatever else the test names. */
export const invoiceRequest = (fields: Pick<InvoiceRequest, 'amount' | 'orderId'> & Partial<InvoiceRequest>): InvoiceRequest => ({
  method: 'sbp',
  customerFeePct: null,
  customerFeeShare: null,
  feePayer: null,
  description: null,
  successUrl: null,
  failUrl: null,
  expireMinutes: 60,
  customer: {},
  customFields: null,
  ...fields,
});
