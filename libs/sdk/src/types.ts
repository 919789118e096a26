/** Names for the generated types (generated/openapi.ts, from GET /v1/openapi.json). */
import type { components, operations } from './generated/openapi';

type Schemas = components['schemas'];

export type Money = Schemas['Money'];
export type Customer = Schemas['Customer'];
export type CreateInvoiceRequest = Schemas['CreateInvoiceRequest'];
export type InvoiceCreated = Schemas['InvoiceCreated'];
export type Invoice = Schemas['Invoice'];
export type InvoiceStatus = Invoice['status'];
export type InvoiceList = Schemas['InvoiceList'];
export type RefundInvoiceRequest = Schemas['RefundInvoiceRequest'];
export type Refund = Schemas['Refund'];
export type Method = Schemas['Method'];
export type MethodList = Schemas['MethodList'];
export type Balance = Schemas['Balance'];
export type PayoutAddress = Schemas['PayoutAddress'];
export type PayoutAddressList = Schemas['PayoutAddressList'];
export type CreatePayoutRequest = Schemas['CreatePayoutRequest'];
export type Payout = Schemas['Payout'];
export type PayoutList = Schemas['PayoutList'];
export type Statement = Schemas['Statement'];
export type AuditKeyList = Schemas['AuditKeyList'];
export type StatementQuery = Query<operations['getStatement']['parameters']['query']>;
export type ErrorBody = Schemas['Error'];
export type ErrorDetail = NonNullable<ErrorBody['error']['details']>[number];

export type InvoiceEvent = Schemas['InvoiceEvent'];
export type RefundEvent = Schemas['RefundEvent'];
export type PayoutEvent = Schemas['PayoutEvent'];
/** The body of a webhook: discriminated by `type`. */
export type WebhookEvent = InvoiceEvent | RefundEvent | PayoutEvent;
export type WebhookEventType = WebhookEvent['type'];

/** An item of GET /events: the webhook body it carries (typed by `type`, as WebhookEvent) and its deliveryStatus. */
export type Event = Schemas['Event'] & WebhookEvent;
export type EventList = Omit<Schemas['EventList'], 'items'> & { items: Event[] };
export type BalanceTransaction = Schemas['BalanceTransaction'];
export type BalanceTransactionList = Schemas['BalanceTransactionList'];

/** A query whose optional parameters also take undefined: the client sends none for it (exactOptionalPropertyTypes lets it be passed). */
type Query<T> = { [K in keyof T]: undefined extends T[K] ? T[K] | undefined : T[K] };
export type ListInvoicesQuery = Query<NonNullable<operations['listInvoices']['parameters']['query']>>;
export type ListEventsQuery = Query<NonNullable<operations['listEvents']['parameters']['query']>>;
/** JSON pages (the CSV export is a plain GET with format=csv). */
export type ListBalanceTransactionsQuery = Query<Omit<NonNullable<operations['listBalanceTransactions']['parameters']['query']>, 'format'>>;
/** GET /payouts without orderId (with orderId the answer is one payout: getPayoutByOrderId). */
export type ListPayoutsQuery = Query<Omit<NonNullable<operations['listPayouts']['parameters']['query']>, 'orderId'>>;
