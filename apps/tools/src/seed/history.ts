/**
 * A realistic payment history, simulated: merchants' buyers create and pay invoices
 * (or let them fail or expire), merchants refund some of them and withdraw their
 * available balance, the operator approves, pays, rejects or cancels payouts. Every
 * step is decided by the gateway's own pure deciders (invoice, refund, payout, ledger)
 * on the state folded from the events already generated, and its events have exactly
 * the shapes, ids and causes the services write (ledger entries keyed by
 * `ledgerEntryId`, with the `{accountId, mode}` metadata of LedgerBook), so the
 * projections, the process managers and `ledger:verify` consume them as they would a
 * live log.
 *
 * Pure: no I/O. Time is simulated (a discrete-event queue), so the history is the
 * same for the same seed whatever the machine. Once the requested number of events
 * is (about to be) reached, no new invoice, refund or payout starts; what is under
 * way and would be finished by the gateway itself (payments, expiries, hold
 * releases, refund processing, the ledger postings of the process managers) is run
 * to its end, so the workers of a projector started on the log find nothing left to
 * do. Payouts waiting for the operator stay pending, approved or processing.
 */
import type { EventToAppend, JsonObject } from '#event-store';
import {
  decideInvoice,
  decidePayout,
  decideRefund,
  evolveInvoice,
  evolvePayout,
  evolveRefund,
  initialInvoice,
  initialPayout,
  initialRefund,
  InvoiceCommand,
  InvoiceCreatedData,
  InvoiceEvent,
  InvoiceRequest,
  InvoiceState,
  invoiceStreamName,
  isPaid,
  isUsdtMethod,
  MethodCode,
  MethodTerms,
  Mode,
  PaidInvoice,
  PayoutCommand,
  PayoutEvent,
  PayoutMethod,
  PayoutState,
  payoutAmounts,
  payoutReservationId,
  payoutStreamName,
  PayoutTerms,
  PayoutTransition,
  planInvoice,
  RefundCommand,
  RefundEvent,
  RefundState,
  refundStreamName,
  refundableRemainder,
  usdtFor,
  Refusal,
} from '#domain';
import {
  causeOf,
  decide,
  entryViolations,
  evolve,
  initialLedgerState,
  Kopecks,
  LedgerCommand,
  LedgerEntryPostedData,
  ledgerEntryId,
  LedgerId,
  LedgerState,
  ledgerStreamName,
  needsCauseLookup,
  MERCHANT_ACCOUNTS,
} from '#ledger';
import type { LedgerRequest } from '#payments/ledger';
import { DUPLICATE_PAYOUT_WINDOW_SECONDS, MAX_UNFINISHED_PAYOUTS } from '#payments/payouts';
import { invoiceIdFor } from '#payments/invoices';
import { methodsOf, PayoutAddress, Project } from '#payments/merchants';
import { Random } from './random';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Events one invoice brings on average, with its share of refunds and payouts, until the history's own is known. */
const EVENTS_PER_INVOICE = 4.4;
/** Invoices after which the history's own events per invoice set the pace of arrivals. */
const PACE_AFTER_INVOICES = 200;
/** The workers tick every 500 ms: they act up to this long after a thing fell due. */
const WORKER_LAG_MS = 600;
const MAX_PAYOUT_BURST = 4;

export interface SeedMerchant {
  readonly index: number;
  readonly accountId: string;
  readonly projects: readonly Project[];
  /** Confirmed payout details of the account. */
  readonly payoutAddresses: readonly PayoutAddress[];
  /** Relative share of the invoices (a few merchants are much busier than the rest). */
  readonly weight: number;
}

/** The gateway terms the history is decided under (from the configuration). */
export interface HistoryTerms {
  readonly refundProcessingSeconds: number;
  readonly payoutTerms: Readonly<Record<PayoutMethod, PayoutTerms>>;
  /** Kopecks per 1 USDT. */
  readonly usdtRubRate: Kopecks;
}

export interface HistoryOptions {
  /** About this many events in all. */
  readonly targetEvents: number;
  /** Simulated time of the first invoice. */
  readonly start: Date;
  /** Simulated days the invoices are spread over. */
  readonly days: number;
}

/** One event and the stream revision it takes. */
export interface SeedWrite {
  readonly streamName: string;
  readonly revision: bigint;
  readonly event: EventToAppend;
}

/** An orderId claimed by a payout (payout_order_ids), as PayoutService records it. */
export interface PayoutClaim {
  readonly accountId: string;
  readonly orderId: string;
  readonly payoutId: number;
}

/** A ledger snapshot due, as LedgerBook takes one every LEDGER_SNAPSHOT_EVERY entries. */
export interface LedgerSnapshot {
  readonly streamName: string;
  readonly revision: bigint;
  readonly state: LedgerState;
}

export interface HistoryBatch {
  /** In the order they happened; a stream's events are in revision order. */
  readonly writes: SeedWrite[];
  readonly claims: PayoutClaim[];
  readonly snapshots: LedgerSnapshot[];
}

interface StreamSim {
  readonly streamName: string;
  /** Revision of the last event generated; -1 before the first. */
  revision: bigint;
}
interface LedgerSim extends StreamSim {
  readonly id: LedgerId;
  state: LedgerState;
  snapshotRevision: bigint;
  /** Every cause posted: the exact answer LedgerBook looks up for causes older than the window. */
  readonly causes: Set<string>;
}
/** The invoice of a simulated stream in its paid phase (the simulation never asks otherwise). */
function paidStateOf(invoice: InvoiceSim): PaidInvoice {
  if (!isPaid(invoice.state)) throw new Error(`seed: invoice ${invoice.streamName} is ${invoice.state.status}, not paid`);
  return invoice.state;
}

interface InvoiceSim extends StreamSim {
  readonly merchant: SeedMerchant;
  readonly project: Project;
  readonly mode: Mode;
  state: InvoiceState;
}
interface RefundSim extends StreamSim {
  readonly invoice: InvoiceSim;
  readonly refundId: string;
  state: RefundState;
}
interface PayoutSim extends StreamSim {
  readonly merchant: SeedMerchant;
  readonly payoutId: number;
  state: PayoutState;
}

type Action =
  | { readonly kind: 'arrival' }
  | { readonly kind: 'choose_method'; readonly invoice: InvoiceSim; readonly method: MethodCode }
  | { readonly kind: 'pay'; readonly invoice: InvoiceSim; readonly method: MethodCode; readonly refund: boolean }
  | { readonly kind: 'fail'; readonly invoice: InvoiceSim }
  | { readonly kind: 'expire'; readonly invoice: InvoiceSim }
  | { readonly kind: 'record_payment'; readonly invoice: InvoiceSim; readonly refund: boolean }
  | { readonly kind: 'release_hold'; readonly ledger: LedgerSim; readonly invoiceId: string }
  | { readonly kind: 'request_refund'; readonly invoice: InvoiceSim }
  | { readonly kind: 'complete_refund'; readonly refund: RefundSim }
  | { readonly kind: 'fail_refund'; readonly refund: RefundSim }
  | { readonly kind: 'payout_round'; readonly merchant: SeedMerchant }
  | { readonly kind: 'payout_step'; readonly payout: PayoutSim; readonly step: PayoutTransition };

interface Scheduled {
  readonly at: number;
  readonly seq: number;
  /**
   * Events this action and what it will set off are expected to add, when they are
   * done whatever happens (the gateway's own work); 0 for what a merchant, buyer or
   * operator would start, which is dropped once the target is reached.
   */
  readonly estimate: number;
  /** Started by a merchant or the operator: not run once the target is reached. */
  readonly optional: boolean;
  readonly action: Action;
}

const ALPHABET_36 = '0123456789abcdefghijklmnopqrstuvwxyz';
const REJECT_REASONS = ['Реквизиты получателя не прошли проверку', 'Банк получателя отклонил перевод', 'Требуются документы по операции'] as const;

/** Moscow time of day shapes the arrivals: quiet at night, busy in the day. */
function arrivalIntensity(at: number): number {
  const hour = (new Date(at).getUTCHours() + 3) % 24;
  const raw = hour >= 1 && hour < 8 ? 0.3 : hour >= 9 && hour < 23 ? 1.2 : 0.7;
  return raw / 0.9125; // mean over the day ≈ 1
}

export class HistoryGenerator {
  private readonly queue = new ActionQueue();
  private readonly cumulativeWeights: Float64Array;
  private readonly ledgers = new Map<string, LedgerSim>();
  private readonly touchedLedgers = new Set<LedgerSim>();
  private readonly methods = new Map<string, MethodTerms[]>();
  private readonly endsAt: number;
  private invoicesCreated = 0;
  private readonly payoutIds: number[] = [];

  private writes: SeedWrite[] = [];
  private claims: PayoutClaim[] = [];
  private now: number;
  private seq = 0;
  private orders = 0;
  private payoutOrders = 0;
  /** Events generated so far. */
  emitted = 0;
  /** Events the work under way is still expected to add. */
  private outstanding = 0;
  private stopped = false;
  private readonly counts = new Map<string, number>();

  constructor(
    private readonly merchants: readonly SeedMerchant[],
    private readonly terms: HistoryTerms,
    private readonly options: HistoryOptions,
    private readonly rng: Random,
  ) {
    if (merchants.length === 0) throw new RangeError('a history needs at least one merchant');
    this.cumulativeWeights = new Float64Array(merchants.length);
    let total = 0;
    merchants.forEach((m, i) => (this.cumulativeWeights[i] = total += m.weight));
    this.now = options.start.getTime();
    this.endsAt = this.now + options.days * DAY;
    this.schedule(this.now, { kind: 'arrival' }, 0, true);
    for (const merchant of merchants) {
      if (merchant.payoutAddresses.length > 0) {
        this.schedule(this.now + this.rng.between(1 * DAY, 3 * DAY), { kind: 'payout_round', merchant }, 0, true);
      }
    }
  }

  /** Everything has happened: nothing is left to generate. */
  get done(): boolean {
    return this.queue.size === 0;
  }

  /** A payout is about to be requested and there is no payout id left to give it. */
  get needsPayoutIds(): boolean {
    const next = this.queue.peek();
    return next !== undefined && next.action.kind === 'payout_round' && !this.stopped && this.payoutIds.length < MAX_PAYOUT_BURST;
  }

  /** Payout ids taken from the database sequence (PayoutService takes them one by one from it). */
  supplyPayoutIds(ids: readonly number[]): void {
    this.payoutIds.push(...ids);
  }

  /** The simulated time reached. */
  get clock(): Date {
    return new Date(this.now);
  }

  /** Events generated so far, by type (refusals and their reasons counted apart). */
  summary(): Readonly<Record<string, number>> {
    return Object.fromEntries([...this.counts.entries()].sort(([a], [b]) => a.localeCompare(b)));
  }

  /**
   * Runs the simulation until at least `minEvents` more events were generated, the
   * history is done, or a payout needs ids (supply them and call again). The events
   * are kept until `takeBatch`.
   */
  generate(minEvents: number): void {
    const until = this.writes.length + minEvents;
    while (this.writes.length < until) {
      if (this.needsPayoutIds) return;
      const next = this.queue.pop();
      if (!next) return;
      this.outstanding -= next.estimate;
      if (next.optional && this.stopped) continue;
      this.now = Math.max(this.now, next.at);
      this.run(next.action);
    }
  }

  /** Hands over what was generated since the last batch, with the snapshots and claims it makes due. */
  takeBatch(snapshotEvery: number): HistoryBatch {
    const snapshots: LedgerSnapshot[] = [];
    for (const ledger of this.touchedLedgers) {
      if (ledger.revision - ledger.snapshotRevision >= BigInt(snapshotEvery)) {
        snapshots.push({ streamName: ledger.streamName, revision: ledger.revision, state: ledger.state });
        ledger.snapshotRevision = ledger.revision;
      }
    }
    this.touchedLedgers.clear();
    const batch = { writes: this.writes, claims: this.claims, snapshots };
    this.writes = [];
    this.claims = [];
    return batch;
  }

  // -------------------------------------------------------------------------------
  // The actions

  private run(action: Action): void {
    switch (action.kind) {
      case 'arrival':
        return this.arrival();
      case 'choose_method':
        if (action.invoice.state.status === 'created' || action.invoice.state.status === 'pending') {
          this.invoiceCommand(action.invoice, { type: 'ChooseMethod', method: action.method, at: this.iso() });
        }
        return;
      case 'pay':
        return this.pay(action.invoice, action.method, action.refund);
      case 'fail':
        this.invoiceCommand(action.invoice, {
          type: 'RecordPaymentResult',
          outcome: 'failed',
          method: null,
          at: this.iso(),
          holdHours: action.invoice.project.holdHours,
          reason: 'declined by the acquirer',
        });
        return;
      case 'expire':
        this.invoiceCommand(action.invoice, { type: 'ExpireInvoice', at: this.iso() });
        return;
      case 'record_payment':
        return this.recordPayment(action.invoice, action.refund);
      case 'release_hold':
        this.post(action.ledger, { type: 'ReleaseHold', invoiceId: action.invoiceId, at: this.iso() });
        return;
      case 'request_refund':
        return this.requestRefund(action.invoice);
      case 'complete_refund':
      case 'fail_refund':
        return this.finishRefund(action.refund, action.kind === 'complete_refund');
      case 'payout_round':
        return this.payoutRound(action.merchant);
      case 'payout_step':
        return this.payoutStep(action.payout, action.step);
    }
  }

  /**
   * The mean gap to the next arrival: the time left of `days` over the invoices still to
   * come, counted with the events per invoice of the history so far (holds, refunds and
   * payouts vary with the merchants), so that the last invoice comes near the end of the
   * days asked for, not weeks past it.
   */
  private meanArrivalGapMs(): number {
    const sent = this.emitted + this.outstanding;
    const perInvoice = this.invoicesCreated >= PACE_AFTER_INVOICES ? sent / this.invoicesCreated : EVENTS_PER_INVOICE;
    const invoicesLeft = Math.max(1, (this.options.targetEvents - sent) / perInvoice);
    return Math.max(SECOND, this.endsAt - this.now) / invoicesLeft;
  }

  /** A buyer arrives at a merchant: an invoice is created, and its fate is set. */
  private arrival(): void {
    if (this.emitted + this.outstanding >= this.options.targetEvents) {
      this.stopped = true;
      return;
    }
    const gap = this.rng.exponential(this.meanArrivalGapMs()) / arrivalIntensity(this.now);
    // Never past the days asked for: what the pace's estimate left over comes at their end.
    this.schedule(Math.min(this.now + gap, Math.max(this.now, this.endsAt)), { kind: 'arrival' }, 0, true);
    this.invoicesCreated += 1;

    const merchant = this.merchants[this.rng.index(this.cumulativeWeights)]!;
    const project = this.rng.pick(merchant.projects);
    const mode: Mode = this.rng.chance(0.85) ? 'live' : 'test';
    const created = this.planInvoice(project, mode);
    const invoice: InvoiceSim = { streamName: invoiceStreamName(created.invoiceId), revision: -1n, merchant, project, mode, state: initialInvoice() };
    this.invoiceCommand(invoice, { type: 'CreateInvoice', data: created });

    const window = Date.parse(created.expiresAt) - this.now;
    const choosable = Object.keys(created.methodRates) as MethodCode[];
    const buyerMethod = () => this.buyerMethod(choosable);
    const fate = this.rng.next();
    if (fate < 0.72) {
      const payAt = this.now + Math.min(window * 0.9, this.rng.logUniform(20 * SECOND, 30 * MINUTE));
      let method = created.method;
      let inline = 0;
      if (method === null) {
        method = buyerMethod();
        if (this.rng.chance(0.7)) {
          this.schedule(this.now + (payAt - this.now) * this.rng.between(0.1, 0.6), { kind: 'choose_method', invoice, method }, 1, false);
        } else inline = 1; // the acquirer's answer names the method: chosen and paid in one append
      }
      const held = project.holdHours > 0 ? 1 : 0;
      const refund = this.rng.chance(0.09);
      this.schedule(payAt, { kind: 'pay', invoice, method, refund }, 1 + inline + 1 + held, false);
    } else if (fate < 0.82) {
      const failAt = this.now + Math.min(window * 0.9, this.rng.logUniform(10 * SECOND, 15 * MINUTE));
      if (created.method === null && this.rng.chance(0.5)) {
        this.schedule(this.now + (failAt - this.now) * this.rng.between(0.1, 0.6), { kind: 'choose_method', invoice, method: buyerMethod() }, 1, false);
      }
      this.schedule(failAt, { kind: 'fail', invoice }, 1, false);
    } else {
      const expireAt = Date.parse(created.expiresAt) + this.rng.between(0, WORKER_LAG_MS);
      if (created.method === null && this.rng.chance(0.4)) {
        this.schedule(this.now + window * this.rng.between(0.05, 0.5), { kind: 'choose_method', invoice, method: buyerMethod() }, 1, false);
      }
      this.schedule(expireAt, { kind: 'expire', invoice }, 1, false);
    }
  }

  private planInvoice(project: Project, mode: Mode): InvoiceCreatedData {
    let methods = this.methods.get(project.id);
    if (!methods) {
      methods = methodsOf(project);
      this.methods.set(project.id, methods);
    }
    const orderId = `order-${(++this.orders).toString().padStart(9, '0')}`;
    const invoiceId = invoiceIdFor(project.idNamespace, mode, orderId);
    const terms = { projectId: project.id, accountId: project.accountId, mode, methods, customerFeeShare: project.customerFeeShare };
    const amount = this.invoiceAmount();
    const inRange = methods.filter((m) => m.enabled && amount >= m.min && amount <= m.max);
    const merchantChooses = inRange.length > 0 && this.rng.chance(0.5);
    const request: InvoiceRequest = {
      amount,
      orderId,
      method: merchantChooses ? this.merchantMethod(inRange) : null,
      customerFeePct: null,
      customerFeeShare: null,
      feePayer: this.rng.chance(0.15) ? 'merchant' : null,
      description: this.rng.chance(0.7) ? `Заказ ${orderId}` : null,
      successUrl: null,
      failUrl: null,
      expireMinutes: Number(this.rng.weighted({ '60': 80, '30': 10, '1440': 10 })),
      customer: { email: this.rng.chance(0.6) ? `buyer${this.rng.int(1, 999_999)}@example.com` : null, phone: null, userId: null, name: null },
      customFields: null,
    };
    try {
      return planInvoice(invoiceId, request, terms, new Date(this.now));
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      // Out of every method's range: the merchant sends a common amount instead.
      return planInvoice(invoiceId, { ...request, method: null, amount: 150_000 }, terms, new Date(this.now));
    }
  }

  /** Rubles, log-normal around 1,500 (a few big tickets), whole rubles mostly. */
  private invoiceAmount(): Kopecks {
    const rubles = Math.min(300_000, Math.max(10, this.rng.logNormal(1_500, 1.1)));
    const kopecks = this.rng.chance(0.8) ? 0 : this.rng.int(0, 99);
    return Math.floor(rubles) * 100 + kopecks;
  }

  private merchantMethod(inRange: readonly MethodTerms[]): MethodCode {
    const weights: Partial<Record<MethodCode, number>> = {};
    for (const m of inRange) weights[m.code] = m.code === 'sbp' ? 50 : m.code === 'card' ? 40 : 10;
    return this.rng.weighted(weights);
  }

  private buyerMethod(choosable: readonly MethodCode[]): MethodCode {
    const weights: Partial<Record<MethodCode, number>> = {};
    for (const code of choosable) weights[code] = code === 'sbp' ? 55 : code === 'card' ? 40 : 5;
    return this.rng.weighted(weights);
  }

  /** The acquirer says paid; the payments process manager will post it to the ledger. */
  private pay(invoice: InvoiceSim, method: MethodCode, refund: boolean): void {
    this.invoiceCommand(invoice, {
      type: 'RecordPaymentResult',
      outcome: 'paid',
      method,
      at: this.iso(),
      holdHours: invoice.project.holdHours,
    });
    const estimate = 1 + (invoice.project.holdHours > 0 ? 1 : 0);
    this.schedule(this.now + this.rng.between(20, 400), { kind: 'record_payment', invoice, refund }, estimate, false);
  }

  /** payments_to_ledger: InvoicePaid → RecordPayment (net to pending until availableAt, the fee to fees). */
  private recordPayment(invoice: InvoiceSim, refund: boolean): void {
    const s = paidStateOf(invoice);
    const ledger = this.ledger(invoice.merchant.accountId, invoice.mode);
    const entry = this.post(ledger, {
      type: 'RecordPayment',
      invoiceId: s.created.invoiceId,
      netAmount: s.amounts.netAmount,
      feeAmount: s.amounts.feeAmount,
      releaseAt: s.availableAt,
      at: s.paidAt,
    });
    if (entry?.hold && entry.hold.releaseAt !== null) {
      const releaseAt = Date.parse(entry.hold.releaseAt) + this.rng.between(0, WORKER_LAG_MS);
      this.schedule(releaseAt, { kind: 'release_hold', ledger, invoiceId: entry.hold.invoiceId }, 1, false);
    }
    if (refund) this.schedule(Date.parse(s.paidAt) + this.rng.logUniform(2 * HOUR, 20 * DAY), { kind: 'request_refund', invoice }, 0, true);
  }

  /** RefundService.request: the invoice grants the amount, the ledger reserves it (or refuses), the refund is created. */
  private requestRefund(invoice: InvoiceSim): void {
    const s = invoice.state;
    if (s.status !== 'paid' && s.status !== 'partially_refunded') return;
    const remainder = refundableRemainder(s);
    if (remainder <= 0) return;
    const refundId = `rf_${this.rng.token(ALPHABET_36, 24)}`;
    const partial = this.rng.chance(0.4) && remainder >= 200;
    const amount = partial ? Math.max(100, Math.floor((remainder * this.rng.between(0.1, 0.9)) / 100) * 100) : null;
    this.invoiceCommand(invoice, { type: 'RequestRefund', refundId, amount, at: this.iso() });
    const asked = paidStateOf(invoice).refunds.get(refundId)!.amount;
    const created = s.created;
    const ledger = this.ledger(created.accountId, created.mode);
    const entry = this.post(ledger, {
      type: 'ReserveFunds',
      reservationId: refundId,
      purpose: 'refund',
      amount: asked,
      at: this.iso(2),
      recordRefusal: true,
    });
    if (entry?.kind === 'reservation_refused') {
      this.count('RefundRefused');
      this.invoiceCommand(invoice, { type: 'ResolveRefund', refundId, outcome: 'refused', at: this.iso(4) });
      // The merchant tries again later, once buyers' money has come in.
      if (this.rng.chance(0.5)) this.schedule(this.now + this.rng.logUniform(HOUR, 3 * DAY), { kind: 'request_refund', invoice }, 0, true);
      return;
    }
    const refund: RefundSim = { streamName: refundStreamName(refundId), revision: -1n, invoice, refundId, state: initialRefund() };
    const processAt = this.now + 4 + this.terms.refundProcessingSeconds * SECOND;
    this.refundCommand(refund, {
      type: 'CreateRefund',
      data: {
        refundId,
        invoiceId: created.invoiceId,
        projectId: created.projectId,
        accountId: created.accountId,
        mode: created.mode,
        amount: asked,
        createdAt: this.iso(4),
        processAt: new Date(processAt).toISOString(),
      },
    });
    const window = this.terms.refundProcessingSeconds * SECOND;
    if (window >= 2 * SECOND && this.rng.chance(0.1)) {
      // The bank refuses it (the operator records that) before the processor completes it.
      this.schedule(this.now + this.rng.between(SECOND, window - 500), { kind: 'fail_refund', refund }, 3, false);
    } else {
      this.schedule(processAt + this.rng.between(0, WORKER_LAG_MS), { kind: 'complete_refund', refund }, 3, false);
    }
  }

  /** The refund's outcome, then what RefundService applies before answering: the ledger and the invoice. */
  private finishRefund(refund: RefundSim, succeeded: boolean): void {
    const at = this.iso();
    this.refundCommand(refund, succeeded ? { type: 'CompleteRefund', at } : { type: 'FailRefund', at, reason: 'Банк отклонил возврат' });
    const created = paidStateOf(refund.invoice).created;
    const ledger = this.ledger(created.accountId, created.mode);
    this.post(
      ledger,
      succeeded ? { type: 'SettleReservation', reservationId: refund.refundId, at } : { type: 'ReleaseReservation', reservationId: refund.refundId, at },
    );
    this.invoiceCommand(refund.invoice, { type: 'ResolveRefund', refundId: refund.refundId, outcome: succeeded ? 'succeeded' : 'failed', at });
    if (refundableRemainder(paidStateOf(refund.invoice)) > 0 && this.rng.chance(0.2)) {
      this.schedule(this.now + this.rng.logUniform(HOUR, 10 * DAY), { kind: 'request_refund', invoice: refund.invoice }, 0, true);
    }
  }

  /**
   * A merchant withdraws part of the live available balance, now and then; a few
   * times several requests come at once (some then refused: too many unfinished, a
   * duplicate within the minute), and a few ask for more than there is.
   */
  private payoutRound(merchant: SeedMerchant): void {
    this.schedule(this.now + this.rng.between(12 * HOUR, 48 * HOUR), { kind: 'payout_round', merchant }, 0, true);
    const ledger = this.ledger(merchant.accountId, 'live');
    const burst = this.rng.chance(0.06) ? this.rng.int(2, MAX_PAYOUT_BURST) : 1;
    let previous: { amount: Kopecks; address: PayoutAddress } | null = null;
    for (let i = 0; i < burst; i++) {
      const t = this.now + i * 7;
      const available = ledger.state.balances.available;
      let address = this.rng.pick(merchant.payoutAddresses);
      let amount: Kopecks;
      let orderId: string | null = this.rng.chance(0.5) ? `payout-${merchant.index}-${++this.payoutOrders}` : null;
      if (previous && this.rng.chance(0.3)) {
        ({ amount, address } = previous); // the same request sent twice, without an orderId
        orderId = null;
      } else if (this.rng.chance(0.03)) {
        amount = available + this.rng.int(1, 5_000) * 100;
      } else {
        amount = Math.floor((available * this.rng.between(0.2, 0.9)) / 100) * 100;
      }
      const terms = this.terms.payoutTerms[address.method];
      if (amount < terms.min) continue;
      previous = { amount, address };
      this.requestPayout(merchant, ledger, address, amount, orderId, t);
    }
  }

  /** PayoutService.create + advance: the request, the ledger's decision, the payout's record of it. */
  private requestPayout(merchant: SeedMerchant, ledger: LedgerSim, address: PayoutAddress, amount: Kopecks, orderId: string | null, t: number): void {
    const payoutId = this.payoutIds.shift()!;
    const terms = this.terms.payoutTerms[address.method];
    const amounts = payoutAmounts(amount, terms);
    const rate = isUsdtMethod(address.method) ? this.terms.usdtRubRate : null;
    const payout: PayoutSim = { streamName: payoutStreamName(payoutId), revision: -1n, merchant, payoutId, state: initialPayout() };
    const createdAt = new Date(t).toISOString();
    this.payoutCommand(payout, {
      type: 'RequestPayout',
      data: {
        payoutId,
        accountId: merchant.accountId,
        projectId: merchant.projects[0]!.id,
        method: address.method,
        addressId: address.id,
        account: address.account,
        bank: address.bank,
        orderId,
        comment: this.rng.chance(0.3) ? 'Вывод выручки' : null,
        ...amounts,
        usdtAmount: rate === null ? null : usdtFor(amounts.netAmount, rate),
        usdtRate: rate,
        source: 'api',
        createdAt,
      },
    });
    const entry = this.post(ledger, {
      type: 'ReserveFunds',
      reservationId: payoutReservationId(payoutId),
      purpose: 'payout',
      amount,
      at: createdAt,
      recordRefusal: true,
      payout: {
        fingerprint: `${amount}|${address.id}`,
        duplicateWindowSeconds: orderId === null ? DUPLICATE_PAYOUT_WINDOW_SECONDS : null,
        maxUnfinished: MAX_UNFINISHED_PAYOUTS,
      },
    });
    const refusal = entry?.kind === 'reservation_refused' ? entry.refusal! : null;
    this.payoutCommand(payout, { type: 'RecordReservation', outcome: refusal ?? 'reserved', at: new Date(t + 3).toISOString() });
    if (refusal) {
      this.count(`PayoutRefused:${refusal}`);
      return;
    }
    if (orderId !== null) this.claims.push({ accountId: merchant.accountId, orderId, payoutId });
    const r = this.rng.next();
    if (r < 0.07) this.scheduleStep(payout, 'cancel', this.rng.logUniform(MINUTE, 6 * HOUR));
    else if (r < 0.1) this.scheduleStep(payout, 'reject', this.rng.logUniform(5 * MINUTE, 12 * HOUR));
    else this.scheduleStep(payout, 'approve', this.rng.logUniform(5 * MINUTE, 12 * HOUR));
  }

  private scheduleStep(payout: PayoutSim, step: PayoutTransition, afterMs: number): void {
    this.schedule(this.now + afterMs, { kind: 'payout_step', payout, step }, 0, true);
  }

  /** An operator transition, and what PayoutService.transition applies before answering: the ledger. */
  private payoutStep(payout: PayoutSim, step: PayoutTransition): void {
    const at = this.iso();
    const command: Exclude<PayoutCommand, { type: 'RequestPayout' | 'RecordReservation' }> =
      step === 'approve'
        ? { type: 'ApprovePayout', at }
        : step === 'process'
          ? { type: 'StartProcessing', at }
          : step === 'pay'
            ? { type: 'PayPayout', at, externalId: this.rng.chance(0.8) ? `bank-${this.rng.token('0123456789', 12)}` : null }
            : step === 'reject'
              ? { type: 'RejectPayout', at, reason: this.rng.pick(REJECT_REASONS) }
              : { type: 'CancelPayout', at, reason: 'Отменена по просьбе мерчанта' };
    const events = this.payoutCommand(payout, command);
    const ledger = this.ledger(payout.merchant.accountId, 'live');
    const reservationId = payoutReservationId(payout.payoutId);
    for (const event of events) {
      if (event.type === 'PayoutPaid') this.post(ledger, { type: 'SettleReservation', reservationId, feeAmount: event.data.feeAmount, at });
      else if (event.type === 'PayoutRejected' || event.type === 'PayoutCancelled') this.post(ledger, { type: 'ReleaseReservation', reservationId, at });
    }
    if (step === 'approve') {
      if (this.rng.chance(0.03)) this.scheduleStep(payout, 'reject', this.rng.logUniform(MINUTE, 3 * HOUR));
      else this.scheduleStep(payout, 'process', this.rng.logUniform(MINUTE, 2 * HOUR));
    } else if (step === 'process') {
      if (this.rng.chance(0.05)) this.scheduleStep(payout, 'reject', this.rng.logUniform(MINUTE, 3 * HOUR));
      else this.scheduleStep(payout, 'pay', this.rng.logUniform(MINUTE, 3 * HOUR));
    }
  }

  // -------------------------------------------------------------------------------
  // Deciding and recording, with the gateway's own deciders

  private invoiceCommand(invoice: InvoiceSim, command: InvoiceCommand): InvoiceEvent[] {
    const decision = decideInvoice(command, invoice.state);
    if (!Array.isArray(decision)) throw new Error(`seed: invoice ${invoice.streamName} refused ${command.type}: ${decision.message}`);
    for (const event of decision) {
      invoice.state = evolveInvoice(invoice.state, event);
      this.emit(invoice, event.type, event.data);
    }
    return decision;
  }

  private refundCommand(refund: RefundSim, command: RefundCommand): RefundEvent[] {
    const decision = decideRefund(command, refund.state);
    if (!Array.isArray(decision)) throw new Error(`seed: refund ${refund.refundId} refused ${command.type}: ${decision.message}`);
    for (const event of decision) {
      refund.state = evolveRefund(refund.state, event);
      this.emit(refund, event.type, event.data);
    }
    return decision;
  }

  private payoutCommand(payout: PayoutSim, command: PayoutCommand): PayoutEvent[] {
    const decision = decidePayout(command, payout.state);
    if (!Array.isArray(decision)) throw new Error(`seed: payout ${payout.payoutId} refused ${command.type}: ${decision.message}`);
    for (const event of decision) {
      payout.state = evolvePayout(payout.state, event);
      this.emit(payout, event.type, event.data);
    }
    return decision;
  }

  /**
   * LedgerBook.post: the entry id derived from the cause, the pure decision, the
   * invariants checked (an entry balances, no merchant account below zero), the
   * book's metadata. A refusal of the ledger here is a bug of the simulation.
   */
  private post(ledger: LedgerSim, request: LedgerRequest): LedgerEntryPostedData | null {
    const cause = causeOf(request as LedgerCommand);
    let command = { ...request, entryId: ledgerEntryId(ledger.id, cause) } as LedgerCommand;
    if (needsCauseLookup(command, ledger.state)) command = { ...command, postedBeforeWindow: ledger.causes.has(cause) };
    const decision = decide(command, ledger.state);
    if (!Array.isArray(decision)) throw new Error(`seed: ledger ${ledger.streamName} refused ${command.type}: ${decision.message}`);
    for (const event of decision) {
      const next = evolve(ledger.state, event);
      const broken = entryViolations(event).map((v) => v.detail);
      for (const account of MERCHANT_ACCOUNTS) if (next.balances[account] < 0) broken.push(`${account} is ${next.balances[account]}`);
      if (broken.length > 0) throw new Error(`seed: ledger ${ledger.streamName} entry ${event.data.entryId} breaks an invariant: ${broken.join('; ')}`);
      ledger.state = next;
      ledger.causes.add(event.data.cause);
      this.emit(ledger, event.type, event.data, event.data.entryId, { accountId: ledger.id.accountId, mode: ledger.id.mode });
      this.touchedLedgers.add(ledger);
    }
    return decision[0]?.data ?? null;
  }

  private ledger(accountId: string, mode: Mode): LedgerSim {
    const id: LedgerId = { accountId, mode };
    const streamName = ledgerStreamName(id);
    let ledger = this.ledgers.get(streamName);
    if (!ledger) {
      ledger = { streamName, revision: -1n, id, state: initialLedgerState(), snapshotRevision: -1n, causes: new Set() };
      this.ledgers.set(streamName, ledger);
    }
    return ledger;
  }

  private emit(stream: StreamSim, type: string, data: JsonObject, id = this.rng.uuid(), metadata?: JsonObject): void {
    stream.revision += 1n;
    this.writes.push({ streamName: stream.streamName, revision: stream.revision, event: metadata ? { id, type, data, metadata } : { id, type, data } });
    this.emitted++;
    this.count(type);
  }

  private count(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  private schedule(at: number, action: Action, estimate: number, optional: boolean): void {
    this.outstanding += estimate;
    this.queue.push({ at, seq: this.seq++, estimate, optional, action });
  }

  /** The simulated time, plus a few milliseconds for the later steps of one request. */
  private iso(plusMs = 0): string {
    return new Date(this.now + plusMs).toISOString();
  }
}

/** A binary min-heap of scheduled actions by (time, order of scheduling). */
class ActionQueue {
  private readonly items: Scheduled[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): Scheduled | undefined {
    return this.items[0];
  }

  push(item: Scheduled): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): Scheduled | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < items.length && before(items[l]!, items[m]!)) m = l;
        if (r < items.length && before(items[r]!, items[m]!)) m = r;
        if (m === i) break;
        [items[i], items[m]] = [items[m]!, items[i]!];
        i = m;
      }
    }
    return top;
  }
}

const before = (a: Scheduled, b: Scheduled): boolean => a.at < b.at || (a.at === b.at && a.seq < b.seq);
