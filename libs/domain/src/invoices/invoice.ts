/**
 * The invoice: pure decisions over its events. No I/O, no clock (times come in the
 * commands), no NestJS.
 *
 * Lifecycle: created → pending (a method was chosen) → paid or failed; created or
 * pending → expired once expiresAt has passed. failed and expired are final; paid
 * goes on to partially_refunded and refunded as refunds succeed.
 */
import type { Kopecks, PercentRate } from '../../../ledger/src/money';
import type { MethodCode } from '../methods';
import { CustomerFeeRequest, customerPctAt, InvoiceAmounts, invoiceAmounts } from './fees';

export const INVOICE_STATUSES = ['created', 'pending', 'paid', 'failed', 'expired', 'refunded', 'partially_refunded'] as const;
export type InvoiceStatus = (typeof INVOICE_STATUSES)[number];
export type Mode = 'test' | 'live';

export interface Customer {
  readonly email?: string | null;
  readonly phone?: string | null;
  readonly userId?: string | null;
  readonly name?: string | null;
}

type Json = { readonly [key: string]: unknown };

export interface InvoiceCreatedData extends Json {
  readonly invoiceId: string;
  readonly projectId: string;
  readonly accountId: string;
  readonly mode: Mode;
  readonly orderId: string;
  readonly amount: Kopecks;
  /** Chosen by the merchant; null: the buyer chooses on the payment page. */
  readonly method: MethodCode | null;
  /** The rates of the methods the buyer may choose, fixed at creation. */
  readonly methodRates: Readonly<Partial<Record<MethodCode, PercentRate>>>;
  readonly customerFee: CustomerFeeRequest;
  readonly amounts: InvoiceAmounts;
  readonly description: string | null;
  readonly customer: Customer;
  readonly customFields: Json | null;
  readonly successUrl: string | null;
  readonly failUrl: string | null;
  readonly createdAt: string;
  readonly expiresAt: string;
}

export type InvoiceEvent =
  | { readonly type: 'InvoiceCreated'; readonly data: InvoiceCreatedData }
  | {
      readonly type: 'InvoiceMethodChosen';
      readonly data: { readonly invoiceId: string; readonly method: MethodCode; readonly amounts: InvoiceAmounts; readonly at: string };
    }
  | {
      readonly type: 'InvoicePaid';
      readonly data: {
        readonly invoiceId: string;
        /** The ledger credited: the merchant account and mode of the invoice. */
        readonly accountId: string;
        readonly mode: Mode;
        readonly method: MethodCode;
        readonly paidAt: string;
        /** When the net amount becomes available for payout; null: no hold. */
        readonly availableAt: string | null;
        readonly netAmount: Kopecks;
        readonly feeAmount: Kopecks;
      };
    }
  | { readonly type: 'InvoiceFailed'; readonly data: { readonly invoiceId: string; readonly at: string; readonly reason: string } }
  | { readonly type: 'InvoiceExpired'; readonly data: { readonly invoiceId: string; readonly at: string } };

export interface Invoice {
  readonly exists: boolean;
  readonly created: InvoiceCreatedData | null;
  readonly status: InvoiceStatus;
  readonly method: MethodCode | null;
  readonly amounts: InvoiceAmounts | null;
  readonly paidAt: string | null;
  readonly availableAt: string | null;
  readonly finishedAt: string | null;
}

export const initialInvoice = (): Invoice => ({
  exists: false,
  created: null,
  status: 'created',
  method: null,
  amounts: null,
  paidAt: null,
  availableAt: null,
  finishedAt: null,
});

export type InvoiceCommand =
  | { readonly type: 'CreateInvoice'; readonly data: InvoiceCreatedData }
  | { readonly type: 'ChooseMethod'; readonly method: MethodCode; readonly at: string }
  | {
      readonly type: 'RecordPaymentResult';
      readonly outcome: 'paid' | 'failed';
      /** The method the buyer paid with, when the acquirer tells it. */
      readonly method: MethodCode | null;
      readonly at: string;
      /** The project's hold at the time of payment. */
      readonly holdHours: number;
      readonly reason?: string;
    }
  | { readonly type: 'ExpireInvoice'; readonly at: string };

export type InvoiceErrorCode = 'invoice_not_found' | 'conflict' | 'method_unavailable' | 'validation';

export class InvoiceError extends Error {
  constructor(
    readonly code: InvoiceErrorCode,
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = 'InvoiceError';
  }
}

const OPEN: readonly InvoiceStatus[] = ['created', 'pending'];
const isOpen = (s: Invoice) => OPEN.includes(s.status);
const hasExpired = (s: Invoice, at: string) => Date.parse(at) >= Date.parse(s.created!.expiresAt);

/** The amounts of an invoice once the buyer pays with `method`, at the rate fixed at creation. */
function amountsFor(created: InvoiceCreatedData, method: MethodCode): InvoiceAmounts | null {
  const rate = created.methodRates[method];
  if (rate === undefined) return null;
  return invoiceAmounts(created.amount, rate, customerPctAt(created.customerFee, rate));
}

export function decideInvoice(command: InvoiceCommand, s: Invoice): InvoiceEvent[] | InvoiceError {
  if (command.type === 'CreateInvoice') {
    if (s.exists) return new InvoiceError('conflict', 'Счёт уже создан');
    return [{ type: 'InvoiceCreated', data: command.data }];
  }
  if (!s.exists) return new InvoiceError('invoice_not_found', 'Счёт не найден');
  const created = s.created!;
  const invoiceId = created.invoiceId;

  switch (command.type) {
    case 'ChooseMethod': {
      if (!isOpen(s) || hasExpired(s, command.at)) return new InvoiceError('conflict', `Счёт в статусе ${s.status}: способ оплаты не изменить`);
      if (s.method === command.method) return [];
      if (created.method !== null) {
        return new InvoiceError('method_unavailable', 'Способ оплаты этого счёта выбран продавцом', 'method');
      }
      const amounts = amountsFor(created, command.method);
      if (!amounts) return new InvoiceError('method_unavailable', 'Этот способ оплаты недоступен для счёта', 'method');
      return [{ type: 'InvoiceMethodChosen', data: { invoiceId, method: command.method, amounts, at: command.at } }];
    }
    case 'RecordPaymentResult': {
      if (!isOpen(s)) return new InvoiceError('conflict', `Счёт в статусе ${s.status}: результат оплаты уже получен или счёт закрыт`);
      if (hasExpired(s, command.at)) return new InvoiceError('conflict', 'Срок оплаты счёта истёк');
      if (command.outcome === 'failed') {
        return [{ type: 'InvoiceFailed', data: { invoiceId, at: command.at, reason: command.reason ?? 'declined' } }];
      }
      const events: InvoiceEvent[] = [];
      let method = s.method;
      let amounts = s.amounts!;
      if (command.method !== null && command.method !== s.method) {
        const chosen = decideInvoice({ type: 'ChooseMethod', method: command.method, at: command.at }, s);
        if (!Array.isArray(chosen)) return chosen;
        events.push(...chosen);
        method = command.method;
        amounts = amountsFor(created, command.method)!;
      }
      if (method === null) return new InvoiceError('validation', 'Укажите способ оплаты: покупатель его не выбрал', 'method');
      const availableAt =
        command.holdHours > 0 ? new Date(Date.parse(command.at) + command.holdHours * 3_600_000).toISOString() : null;
      events.push({
        type: 'InvoicePaid',
        data: {
          invoiceId,
          accountId: created.accountId,
          mode: created.mode,
          method,
          paidAt: command.at,
          availableAt,
          netAmount: amounts.netAmount,
          feeAmount: amounts.feeAmount,
        },
      });
      return events;
    }
    case 'ExpireInvoice': {
      if (!isOpen(s) || !hasExpired(s, command.at)) return [];
      return [{ type: 'InvoiceExpired', data: { invoiceId, at: command.at } }];
    }
  }
}

export function evolveInvoice(s: Invoice, event: InvoiceEvent): Invoice {
  switch (event.type) {
    case 'InvoiceCreated':
      return { ...s, exists: true, created: event.data, status: 'created', method: event.data.method, amounts: event.data.amounts };
    case 'InvoiceMethodChosen':
      return { ...s, status: 'pending', method: event.data.method, amounts: event.data.amounts };
    case 'InvoicePaid':
      return { ...s, status: 'paid', method: event.data.method, paidAt: event.data.paidAt, availableAt: event.data.availableAt, finishedAt: event.data.paidAt };
    case 'InvoiceFailed':
      return { ...s, status: 'failed', finishedAt: event.data.at };
    case 'InvoiceExpired':
      return { ...s, status: 'expired', finishedAt: event.data.at };
  }
}

export const invoiceDecider = {
  initialState: initialInvoice,
  evolve: evolveInvoice,
  decide: decideInvoice,
};

export const INVOICE_CATEGORY = 'invoice';
export const invoiceStreamName = (invoiceId: string) => `${INVOICE_CATEGORY}-${invoiceId}`;
