import { Refusal } from '#ledger';
import type { Kopecks, PercentRate } from '#ledger';
import { formatMoney, formatPercent, MAX_MONEY_KOPECKS } from '#ledger';
import type { MethodCode, MethodTerms } from '../methods';
import { CustomerFeeRequest, customerPctAt, FeePayer, invoiceAmounts, payableAmountOf } from './fees';
import type { Customer, InvoiceCreatedData, Mode } from './invoice';

/** POST /invoices after its format was checked: amounts in kopecks, rates exact. */
export interface InvoiceRequest {
  readonly amount: Kopecks;
  readonly orderId: string;
  readonly method: MethodCode | null;
  readonly customerFeePct: PercentRate | null;
  readonly customerFeeShare: number | null;
  readonly feePayer: FeePayer | null;
  readonly description: string | null;
  readonly successUrl: string | null;
  readonly failUrl: string | null;
  readonly expireMinutes: number;
  readonly customer: Customer;
  readonly customFields: { readonly [key: string]: unknown } | null;
}

export interface ProjectTerms {
  readonly projectId: string;
  readonly accountId: string;
  readonly mode: Mode;
  readonly methods: readonly MethodTerms[];
  /** The project's slider: the buyer's share of the rate, whole percent (default 100). */
  readonly customerFeeShare: number;
}

export type InvoicePlanErrorCode = 'amount_out_of_range' | 'method_unavailable' | 'customer_fee_pct_too_high';

export function customerFeeRequest(request: InvoiceRequest, project: Pick<ProjectTerms, 'customerFeeShare'>): CustomerFeeRequest {
  if (request.customerFeePct !== null) return { kind: 'pct', pct: request.customerFeePct };
  if (request.customerFeeShare !== null) return { kind: 'share', share: request.customerFeeShare };
  if (request.feePayer !== null) return { kind: 'payer', payer: request.feePayer };
  return { kind: 'project_default', share: project.customerFeeShare };
}

/**
 * The invoice a request creates, or the 422 that refuses it. With a method: its
 * rate, limits and availability. Without one: the buyer may choose among the enabled
 * methods whose limits hold the amount, and the amounts are shown at the largest of
 * their rates until the buyer chooses.
 */
export function planInvoice(invoiceId: string, request: InvoiceRequest, project: ProjectTerms, now: Date): InvoiceCreatedData {
  // An invoice of nothing is none, whatever a method's minimum says: paid, it could not be posted.
  const minOf = (m: MethodTerms) => Math.max(m.min, 1);
  const inRange = (m: MethodTerms) => request.amount >= minOf(m) && request.amount <= m.max;
  let choosable: readonly MethodTerms[];
  if (request.method !== null) {
    const terms = project.methods.find((m) => m.code === request.method);
    if (!terms || !terms.enabled) {
      throw new Refusal<InvoicePlanErrorCode>('method_unavailable', `Способ оплаты ${request.method} недоступен для проекта`, 'method');
    }
    if (!inRange(terms)) {
      throw new Refusal<InvoicePlanErrorCode>(
        'amount_out_of_range',
        `Сумма для способа ${terms.code} должна быть от ${formatMoney(minOf(terms))} до ${formatMoney(terms.max)}`,
        'amount',
      );
    }
    choosable = [terms];
  } else {
    const enabled = project.methods.filter((m) => m.enabled);
    if (enabled.length === 0) throw new Refusal<InvoicePlanErrorCode>('method_unavailable', 'В проекте нет доступных способов оплаты', 'method');
    choosable = enabled.filter(inRange);
    if (choosable.length === 0) throw new Refusal<InvoicePlanErrorCode>('amount_out_of_range', amountsTaken(enabled, minOf), 'amount');
  }

  const feePct = Math.max(...choosable.map((m) => m.feePct));
  if (request.customerFeePct !== null && request.customerFeePct > feePct) {
    throw new Refusal<InvoicePlanErrorCode>(
      'customer_fee_pct_too_high',
      `customerFeePct не может быть больше ставки ${formatPercent(feePct)} %`,
      'customerFeePct',
    );
  }
  const customerFee = customerFeeRequest(request, project);
  const customerPct = customerPctAt(customerFee, feePct);
  // What the buyer pays is one amount of money too: it may not pass the largest the gateway handles.
  if (payableAmountOf(request.amount, customerPct) > MAX_MONEY_KOPECKS) {
    throw new Refusal<InvoicePlanErrorCode>(
      'amount_out_of_range',
      `Сумма к оплате с комиссией покупателя больше ${formatMoney(MAX_MONEY_KOPECKS)}: уменьшите сумму или долю комиссии покупателя`,
      'amount',
    );
  }
  const amounts = invoiceAmounts(request.amount, feePct, customerPct);

  return {
    invoiceId,
    projectId: project.projectId,
    accountId: project.accountId,
    mode: project.mode,
    orderId: request.orderId,
    amount: request.amount,
    method: request.method,
    methodRates: Object.fromEntries(choosable.map((m) => [m.code, m.feePct])),
    customerFee,
    amounts,
    description: request.description,
    customer: request.customer,
    customFields: request.customFields,
    successUrl: request.successUrl,
    failUrl: request.failUrl,
    createdAt: now.toISOString(),
    expiresAt: new Date(now.getTime() + request.expireMinutes * 60_000).toISOString(),
  };
}

/**
 * What the enabled methods take, said so that it is true of every amount it names: one
 * range when their ranges join up; with a gap between them (sbp to 100.00, crypto from
 * 500.00), each method's own, since an amount in the gap is inside "from the least
 * minimum to the largest maximum" and still taken by none.
 */
function amountsTaken(enabled: readonly MethodTerms[], minOf: (m: MethodTerms) => Kopecks): string {
  const ranges = enabled
    .map((m) => ({ code: m.code, min: minOf(m), max: m.max }))
    .filter((r) => r.min <= r.max)
    .sort((a, b) => a.min - b.min || a.max - b.max);
  if (ranges.length === 0) return 'Ни один включённый способ оплаты не принимает сумм: их максимумы меньше 0.01';
  let reach = ranges[0]!.max;
  let joined = true;
  for (const r of ranges) {
    // Amounts are whole kopecks: [10.00, 100.00] and [100.01, 200.00] leave no amount out.
    if (r.min > reach + 1) joined = false;
    reach = Math.max(reach, r.max);
  }
  if (joined) return `Сумма должна быть от ${formatMoney(ranges[0]!.min)} до ${formatMoney(reach)}`;
  const each = ranges.map((r) => `${r.code} — от ${formatMoney(r.min)} до ${formatMoney(r.max)}`).join(', ');
  return `Ни один включённый способ оплаты не принимает эту сумму: ${each}`;
}

/**
 * An orderId repeat is the same invoice when amount, method and the buyer's percent
 * agree (the spec's "same parameters"); otherwise it is an order_id_conflict.
 */
export function sameInvoiceParameters(existing: InvoiceCreatedData, repeat: InvoiceRequest, project: Pick<ProjectTerms, 'customerFeeShare'>): boolean {
  // Both buyer's percents at the rate the invoice was created with; a repeat without
  // fee parameters means the project's slider as it was then, not as it is now.
  const rate = existing.amounts.feePct;
  const slider = existing.customerFee.kind === 'project_default' ? { customerFeeShare: existing.customerFee.share } : project;
  // A percent asked as such is compared as asked (with the one first asked, if so): one above the rate is not "the
  // whole rate", it is refused on its own.
  const asked = customerFeeRequest(repeat, slider);
  const first = existing.customerFee;
  const samePct =
    asked.kind === 'pct'
      ? asked.pct === (first.kind === 'pct' ? first.pct : customerPctAt(first, rate))
      : customerPctAt(first, rate) === customerPctAt(asked, rate);
  return existing.amount === repeat.amount && existing.method === repeat.method && samePct;
}
