/**
 * The invoice: pure decisions over its events. No I/O, no clock (times come in the
 * commands), no NestJS.
 *
 * Lifecycle: created → pending (a method was chosen) → paid or failed; created or
 * pending → expired once expiresAt has passed. failed and expired are final; paid
 * goes on to partially_refunded and refunded as refunds succeed.
 *
 * Refunds: the invoice decides how much may still be refunded (its amount less what
 * was refunded and what refunds still pending hold), so two refunds can never exceed
 * it. A request stays pending on the invoice until its refund succeeds (refunded),
 * fails, or is refused for want of balance (returned to the remainder).
 */
import type { Kopecks, PercentRate } from '#ledger';
import type { MethodCode } from '../methods';
import { CustomerFeeRequest, customerPctAt, InvoiceAmounts, invoiceAmounts } from './fees';

export const INVOICE_STATUSES = ['created', 'pending', 'paid', 'failed', 'expired', 'refunded', 'partially_refunded'] as const;
export type InvoiceStatus = (typeof INVOICE_STATUSES)[number];
export type Mode = 'test' | 'live';
/** The acquirer's answer for an invoice. */
export const PAYMENT_OUTCOMES = ['paid', 'failed'] as const;
export type PaymentOutcome = (typeof PAYMENT_OUTCOMES)[number];

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
  | { readonly type: 'InvoiceExpired'; readonly data: { readonly invoiceId: string; readonly at: string } }
  | {
      readonly type: 'InvoiceRefundRequested';
      readonly data: {
        readonly invoiceId: string;
        readonly refundId: string;
        readonly projectId: string;
        readonly accountId: string;
        readonly mode: Mode;
        readonly amount: Kopecks;
        readonly at: string;
      };
    }
  | {
      readonly type: 'InvoiceRefunded';
      readonly data: {
        readonly invoiceId: string;
        readonly refundId: string;
        readonly amount: Kopecks;
        /** Refunded in all, this refund included. */
        readonly refundedAmount: Kopecks;
        readonly at: string;
      };
    }
  | {
      readonly type: 'InvoiceRefundReleased';
      readonly data: {
        readonly invoiceId: string;
        readonly refundId: string;
        readonly amount: Kopecks;
        /** failed: the bank refused the refund; refused: the merchant's balance was short. */
        readonly reason: 'failed' | 'refused';
        readonly at: string;
      };
    };

export type RefundOnInvoice = 'requested' | 'succeeded' | 'failed' | 'refused';

export interface Invoice {
  readonly exists: boolean;
  readonly created: InvoiceCreatedData | null;
  readonly status: InvoiceStatus;
  readonly method: MethodCode | null;
  readonly amounts: InvoiceAmounts | null;
  readonly paidAt: string | null;
  readonly availableAt: string | null;
  readonly finishedAt: string | null;
  /** Refunded in all (succeeded refunds). */
  readonly refundedAmount: Kopecks;
  /** Held by refunds still pending. */
  readonly refundPendingAmount: Kopecks;
  /** Every refund asked for, by id: its amount and where it stands. */
  readonly refunds: Readonly<Record<string, { readonly amount: Kopecks; readonly status: RefundOnInvoice }>>;
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
  refundedAmount: 0,
  refundPendingAmount: 0,
  refunds: {},
});

export type InvoiceCommand =
  | { readonly type: 'CreateInvoice'; readonly data: InvoiceCreatedData }
  | { readonly type: 'ChooseMethod'; readonly method: MethodCode; readonly at: string }
  | {
      readonly type: 'RecordPaymentResult';
      readonly outcome: PaymentOutcome;
      /** The method the buyer paid with, when the acquirer tells it. */
      readonly method: MethodCode | null;
      readonly at: string;
      /** The project's hold at the time of payment. */
      readonly holdHours: number;
      readonly reason?: string;
    }
  | { readonly type: 'ExpireInvoice'; readonly at: string }
  /** amount null: the whole remainder. */
  | { readonly type: 'RequestRefund'; readonly refundId: string; readonly amount: Kopecks | null; readonly at: string }
  | { readonly type: 'ResolveRefund'; readonly refundId: string; readonly outcome: 'succeeded' | 'failed' | 'refused'; readonly at: string };

export type InvoiceErrorCode = 'invoice_not_found' | 'conflict' | 'method_unavailable' | 'validation' | 'refund_exceeds_amount';

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
      const availableAt = command.holdHours > 0 ? new Date(Date.parse(command.at) + command.holdHours * 3_600_000).toISOString() : null;
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
    case 'RequestRefund': {
      // The same request again (a retry, or recovery finishing it): already decided.
      if (Object.hasOwn(s.refunds, command.refundId)) return [];
      if (s.status !== 'paid' && s.status !== 'partially_refunded') {
        return new InvoiceError('conflict', `Счёт в статусе ${s.status}: вернуть можно только оплаченный (paid или partially_refunded)`);
      }
      const remainder = refundableRemainder(s);
      const amount = command.amount ?? remainder;
      if (amount <= 0 || amount > remainder) {
        return new InvoiceError(
          'refund_exceeds_amount',
          remainder === 0
            ? 'Возвращать нечего: вся сумма счёта уже возвращена или ждёт возврата'
            : `Сумма возврата больше невозвращённого остатка счёта (${remainder} коп., с учётом возвратов в обработке)`,
          command.amount === null ? undefined : 'amount',
        );
      }
      const { projectId, accountId, mode } = created;
      return [{ type: 'InvoiceRefundRequested', data: { invoiceId, refundId: command.refundId, projectId, accountId, mode, amount, at: command.at } }];
    }
    case 'ResolveRefund': {
      const refund = Object.hasOwn(s.refunds, command.refundId) ? s.refunds[command.refundId]! : null;
      if (!refund) return new InvoiceError('conflict', `Возврат ${command.refundId} по этому счёту не запрашивался`);
      if (refund.status !== 'requested') return [];
      const base = { invoiceId, refundId: command.refundId, amount: refund.amount, at: command.at };
      if (command.outcome === 'succeeded') {
        return [{ type: 'InvoiceRefunded', data: { ...base, refundedAmount: s.refundedAmount + refund.amount } }];
      }
      return [{ type: 'InvoiceRefundReleased', data: { ...base, reason: command.outcome } }];
    }
  }
}

/** What may still be refunded: the amount less what was refunded and what pending refunds hold. */
export const refundableRemainder = (s: Invoice): Kopecks => s.created!.amount - s.refundedAmount - s.refundPendingAmount;

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
    case 'InvoiceRefundRequested': {
      const { refundId, amount } = event.data;
      return { ...s, refundPendingAmount: s.refundPendingAmount + amount, refunds: { ...s.refunds, [refundId]: { amount, status: 'requested' } } };
    }
    case 'InvoiceRefunded': {
      const { refundId, amount, refundedAmount } = event.data;
      return {
        ...s,
        status: refundedAmount >= s.created!.amount ? 'refunded' : 'partially_refunded',
        refundedAmount,
        refundPendingAmount: s.refundPendingAmount - amount,
        refunds: { ...s.refunds, [refundId]: { amount, status: 'succeeded' } },
      };
    }
    case 'InvoiceRefundReleased': {
      const { refundId, amount, reason } = event.data;
      return {
        ...s,
        refundPendingAmount: s.refundPendingAmount - amount,
        refunds: { ...s.refunds, [refundId]: { amount, status: reason } },
      };
    }
  }
}

export const invoiceDecider = {
  initialState: initialInvoice,
  evolve: evolveInvoice,
  decide: decideInvoice,
};

export const INVOICE_CATEGORY = 'invoice';
export const invoiceStreamName = (invoiceId: string) => `${INVOICE_CATEGORY}-${invoiceId}`;
