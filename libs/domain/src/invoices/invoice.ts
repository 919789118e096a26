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
 * fails, or is refused for want of balance (returned to the remainder). An invoice
 * takes at most MAX_REFUNDS_PER_INVOICE refunds (refused ones not counted).
 */
import { formatMoney, Refusal } from '#ledger';
import type { Kopecks, PercentRate } from '#ledger';
import type { MethodCode } from '../methods';
import { PersistentMap } from '../persistent-map';
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
        /**
         * refused: the merchant's balance was short and the request was answered so (422),
         * never shown as a refund; failed: the refund failed after it was answered (the bank
         * refused it, or the balance was short when the recovery took over its reservation).
         */
        readonly reason: 'failed' | 'refused';
        readonly at: string;
      };
    };

export type RefundOnInvoice = 'requested' | 'succeeded' | 'failed' | 'refused';

/** A refund asked of the invoice: its amount, where it stands, when it was asked for (the refund's createdAt). */
export interface RefundAsked {
  readonly amount: Kopecks;
  readonly status: RefundOnInvoice;
  readonly requestedAt: string;
}

/** What every invoice has from its creation on. */
interface InvoiceFacts {
  readonly created: InvoiceCreatedData;
  /** Chosen by the merchant, then by the buyer; null until one is. */
  readonly method: MethodCode | null;
  /** At the chosen method's rate (at the largest rate while none is chosen). */
  readonly amounts: InvoiceAmounts;
}

/** Waiting for the buyer: `created`, or `pending` once a method was chosen. */
export interface OpenInvoice extends InvoiceFacts {
  readonly status: 'created' | 'pending';
  /** How many times the buyer chose a method (each an `InvoiceMethodChosen`). */
  readonly methodChoices: number;
}

/** Paid; then partially refunded or refunded as refunds succeed. */
export interface PaidInvoice extends InvoiceFacts {
  readonly status: 'paid' | 'partially_refunded' | 'refunded';
  readonly method: MethodCode;
  readonly paidAt: string;
  /** When the net amount becomes available for payout; null: no hold. */
  readonly availableAt: string | null;
  /** Refunded in all (succeeded refunds). */
  readonly refundedAmount: Kopecks;
  /** Held by refunds still pending. */
  readonly refundPendingAmount: Kopecks;
  /**
   * Every refund asked for, by id (refused and failed ones too). Persistent: each
   * refund event sets one entry without copying the others, so folding an invoice's
   * history stays linear in its events.
   */
  readonly refunds: PersistentMap<RefundAsked>;
  /** Of those, refused for want of balance: never shown, not counted against MAX_REFUNDS_PER_INVOICE. */
  readonly refundsRefused: number;
}

/** Failed or expired: final. */
export interface ClosedInvoice extends InvoiceFacts {
  readonly status: 'failed' | 'expired';
  readonly finishedAt: string;
}

/** An invoice: one of its phases. */
export type Invoice = OpenInvoice | PaidInvoice | ClosedInvoice;

/** An invoice stream's state: no invoice yet, or the invoice. */
export type InvoiceState = { readonly status: 'none' } | Invoice;

export const initialInvoice = (): InvoiceState => ({ status: 'none' });

export const isPaid = (s: InvoiceState): s is PaidInvoice => s.status === 'paid' || s.status === 'partially_refunded' || s.status === 'refunded';
const isOpen = (s: InvoiceState): s is OpenInvoice => s.status === 'created' || s.status === 'pending';

export type InvoiceCommand =
  | { readonly type: 'CreateInvoice'; readonly data: InvoiceCreatedData }
  | { readonly type: 'ChooseMethod'; readonly method: MethodCode; readonly at: string }
  | {
      readonly type: 'RecordPaymentResult';
      readonly outcome: PaymentOutcome;
      /** The method the buyer paid with, when the acquirer tells it. */
      readonly method: MethodCode | null;
      readonly at: string;
      /** When the result came, if the decision was dated again later for its append (decidedNow): the expiry is judged by it. */
      readonly receivedAt?: string;
      /** The project's hold at the time of payment. */
      readonly holdHours: number;
      readonly reason?: string;
    }
  | { readonly type: 'ExpireInvoice'; readonly at: string }
  /** amount null: the whole remainder. */
  | { readonly type: 'RequestRefund'; readonly refundId: string; readonly amount: Kopecks | null; readonly at: string }
  | { readonly type: 'ResolveRefund'; readonly refundId: string; readonly outcome: 'succeeded' | 'failed' | 'refused'; readonly at: string };

export type InvoiceErrorCode = 'invoice_not_found' | 'conflict' | 'method_unavailable' | 'method_choice_limit' | 'validation' | 'refund_exceeds_amount';
export type InvoiceError = Refusal<InvoiceErrorCode>;

const hasExpired = (s: Invoice, at: string) => Date.parse(at) >= Date.parse(s.created.expiresAt);

/**
 * The status an invoice has at `at`: an open invoice past its expiresAt is expired, as
 * every decision at `at` treats it, before the expiry worker records InvoiceExpired.
 */
export const invoiceStatusAt = (s: Invoice, at: string): InvoiceStatus => (isOpen(s) && hasExpired(s, at) ? 'expired' : s.status);

/**
 * How many times the buyer may choose a method on one invoice: plenty for a buyer who
 * changes their mind, while whoever holds the payment link cannot grow its stream
 * without bound. The acquirer's report of the method paid with is not counted.
 */
export const MAX_METHOD_CHOICES = 20;

/**
 * How many refunds one invoice takes, whatever became of them (a failed one counts too:
 * each adds its events to the invoice's stream; one refused for want of balance, never
 * shown, does not). Plenty for an order
 * refunded line by line, while every read and command of the invoice, which folds its
 * stream, stays a few hundred events at most.
 */
export const MAX_REFUNDS_PER_INVOICE = 100;

/** The method choices the buyer has left on the invoice (0 once it is no longer open). */
export const methodChoicesLeft = (s: Invoice): number => (isOpen(s) ? Math.max(0, MAX_METHOD_CHOICES - s.methodChoices) : 0);

/** What the buyer confirmed on the payment page: the method and the payable total it showed (formatMoney text, "1015.00"). */
export interface ConfirmedTerms {
  readonly method: string | undefined;
  readonly payableAmount: string | undefined;
}

/**
 * Whether a payment may go ahead on what the buyer confirmed: the invoice has a method,
 * and it and the payable total are the ones the buyer saw. A method changed since (in
 * another tab, at once), or a confirmation without them, does not hold: the buyer is
 * shown the invoice as it is now and confirms again.
 */
export function confirmedTermsHold(s: Invoice, confirmed: ConfirmedTerms): boolean {
  return s.method !== null && confirmed.method === s.method && confirmed.payableAmount === formatMoney(s.amounts.payableAmount);
}

/** The amounts of an invoice once the buyer pays with `method`, at the rate fixed at creation. */
function amountsFor(created: InvoiceCreatedData, method: MethodCode): InvoiceAmounts | null {
  const rate = created.methodRates[method];
  if (rate === undefined) return null;
  return invoiceAmounts(created.amount, rate, customerPctAt(created.customerFee, rate));
}

export function decideInvoice(command: InvoiceCommand, s: InvoiceState): InvoiceEvent[] | InvoiceError {
  if (command.type === 'CreateInvoice') {
    if (s.status !== 'none') return new Refusal('conflict', 'Счёт уже создан');
    return [{ type: 'InvoiceCreated', data: command.data }];
  }
  if (s.status === 'none') return new Refusal('invoice_not_found', 'Счёт не найден');
  const created = s.created;
  const invoiceId = created.invoiceId;

  switch (command.type) {
    case 'ChooseMethod': {
      if (!isOpen(s) || hasExpired(s, command.at)) return new Refusal('conflict', `Счёт в статусе ${s.status}: способ оплаты не изменить`);
      const chosen = chooseMethod(s, command.method, command.at);
      if (Array.isArray(chosen) && chosen.length > 0 && methodChoicesLeft(s) === 0) {
        return new Refusal(
          'method_choice_limit',
          `Способ оплаты этого счёта выбирали уже ${MAX_METHOD_CHOICES} раз: больше его не изменить, остаётся выбранный`,
          'method',
        );
      }
      return chosen;
    }
    case 'RecordPaymentResult': {
      if (!isOpen(s)) return new Refusal('conflict', `Счёт в статусе ${s.status}: результат оплаты уже получен или счёт закрыт`);
      if (hasExpired(s, command.receivedAt ?? command.at)) return new Refusal('conflict', 'Срок оплаты счёта истёк');
      const events: InvoiceEvent[] = [];
      let method = s.method;
      let amounts = s.amounts;
      if (command.method !== null && command.method !== s.method) {
        // What the acquirer reports is recorded whatever the buyer's choices before it, for a failure
        // too; a failure is recorded even with a method the invoice refuses (then without it).
        const chosen = chooseMethod(s, command.method, command.at);
        if (Array.isArray(chosen)) {
          events.push(...chosen);
          method = command.method;
          amounts = amountsFor(created, command.method)!;
        } else if (command.outcome !== 'failed') return chosen;
      }
      if (command.outcome === 'failed') {
        events.push({ type: 'InvoiceFailed', data: { invoiceId, at: command.at, reason: command.reason ?? 'declined' } });
        return events;
      }
      if (method === null) return new Refusal('validation', 'Укажите способ оплаты: покупатель его не выбрал', 'method');
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
      if (isPaid(s) && s.refunds.has(command.refundId)) return [];
      if (s.status !== 'paid' && s.status !== 'partially_refunded') {
        return new Refusal('conflict', `Счёт в статусе ${s.status}: вернуть можно только оплаченный (paid или partially_refunded)`);
      }
      // Refused ones (never shown: the request was answered 422) do not count: a merchant retrying a refund until its balance allows must not lock the invoice.
      if (s.refunds.size - s.refundsRefused >= MAX_REFUNDS_PER_INVOICE) {
        return new Refusal(
          'conflict',
          `По счёту уже ${MAX_REFUNDS_PER_INVOICE} возвратов (столько принимается на один счёт, не считая отказанных за нехваткой баланса): новый возврат не принять`,
        );
      }
      const remainder = refundableRemainder(s);
      const amount = command.amount ?? remainder;
      if (amount <= 0 || amount > remainder) {
        return new Refusal(
          'refund_exceeds_amount',
          remainder === 0
            ? 'Возвращать нечего: вся сумма счёта уже возвращена или ждёт возврата'
            : `Сумма возврата больше невозвращённого остатка счёта: остаток ${formatMoney(remainder)} с учётом возвратов в обработке`,
          command.amount === null ? undefined : 'amount',
        );
      }
      const { projectId, accountId, mode } = created;
      return [{ type: 'InvoiceRefundRequested', data: { invoiceId, refundId: command.refundId, projectId, accountId, mode, amount, at: command.at } }];
    }
    case 'ResolveRefund': {
      const refund = isPaid(s) ? (s.refunds.get(command.refundId) ?? null) : null;
      if (!isPaid(s) || !refund) return new Refusal('conflict', `Возврат ${command.refundId} по этому счёту не запрашивался`);
      if (refund.status !== 'requested') return [];
      const base = { invoiceId, refundId: command.refundId, amount: refund.amount, at: command.at };
      if (command.outcome === 'succeeded') {
        return [{ type: 'InvoiceRefunded', data: { ...base, refundedAmount: s.refundedAmount + refund.amount } }];
      }
      return [{ type: 'InvoiceRefundReleased', data: { ...base, reason: command.outcome } }];
    }
  }
}

/** The method of an open invoice, as the buyer (or the acquirer) chose it; none again for the same method. */
function chooseMethod(s: OpenInvoice, method: MethodCode, at: string): InvoiceEvent[] | InvoiceError {
  if (s.method === method) return [];
  const { created } = s;
  if (created.method !== null) return new Refusal('method_unavailable', 'Способ оплаты этого счёта выбран продавцом', 'method');
  const amounts = amountsFor(created, method);
  if (!amounts) return new Refusal('method_unavailable', 'Этот способ оплаты недоступен для счёта', 'method');
  return [{ type: 'InvoiceMethodChosen', data: { invoiceId: created.invoiceId, method, amounts, at } }];
}

/** What may still be refunded: the amount less what was refunded and what pending refunds hold. */
export const refundableRemainder = (s: PaidInvoice): Kopecks => s.created.amount - s.refundedAmount - s.refundPendingAmount;

/**
 * One event folded into the state. Each event belongs to one phase (decideInvoice
 * appends no other): an event that does not fit the state's phase leaves it as it is.
 */
export function evolveInvoice(s: InvoiceState, event: InvoiceEvent): InvoiceState {
  switch (event.type) {
    case 'InvoiceCreated':
      return { status: 'created', created: event.data, method: event.data.method, amounts: event.data.amounts, methodChoices: 0 };
    case 'InvoiceMethodChosen':
      return isOpen(s) ? { ...s, status: 'pending', method: event.data.method, amounts: event.data.amounts, methodChoices: s.methodChoices + 1 } : s;
    case 'InvoicePaid':
      if (!isOpen(s)) return s;
      return {
        created: s.created,
        amounts: s.amounts,
        status: 'paid',
        method: event.data.method,
        paidAt: event.data.paidAt,
        availableAt: event.data.availableAt,
        refundedAmount: 0,
        refundPendingAmount: 0,
        refunds: PersistentMap.empty(),
        refundsRefused: 0,
      };
    case 'InvoiceFailed':
      return isOpen(s) ? { created: s.created, method: s.method, amounts: s.amounts, status: 'failed', finishedAt: event.data.at } : s;
    case 'InvoiceExpired':
      return isOpen(s) ? { created: s.created, method: s.method, amounts: s.amounts, status: 'expired', finishedAt: event.data.at } : s;
    case 'InvoiceRefundRequested': {
      if (!isPaid(s)) return s;
      const { refundId, amount, at } = event.data;
      return {
        ...s,
        refundPendingAmount: s.refundPendingAmount + amount,
        refunds: s.refunds.set(refundId, { amount, status: 'requested', requestedAt: at }),
      };
    }
    case 'InvoiceRefunded': {
      if (!isPaid(s)) return s;
      const { refundId, amount, refundedAmount } = event.data;
      return {
        ...s,
        status: refundedAmount >= s.created.amount ? 'refunded' : 'partially_refunded',
        refundedAmount,
        refundPendingAmount: s.refundPendingAmount - amount,
        refunds: s.refunds.set(refundId, { ...s.refunds.get(refundId)!, amount, status: 'succeeded' }),
      };
    }
    case 'InvoiceRefundReleased': {
      if (!isPaid(s)) return s;
      const { refundId, amount, reason } = event.data;
      return {
        ...s,
        refundPendingAmount: s.refundPendingAmount - amount,
        refunds: s.refunds.set(refundId, { ...s.refunds.get(refundId)!, amount, status: reason }),
        refundsRefused: s.refundsRefused + (reason === 'refused' ? 1 : 0),
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
