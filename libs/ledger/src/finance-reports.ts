/**
 * Pure folds behind the finance reports (statements, trial balance, reconciliation).
 * No I/O: the queries of libs/payments/src/audit feed them with entries and flows.
 *
 * Debit and credit: a posting's amount is signed (see ledger.ts); a negative amount is
 * a debit of its account, a positive one a credit. So merchant accounts (what the
 * gateway owes) carry credit balances, acquiring_clearing (what the acquirer owes the
 * gateway) a debit balance, and in every ledger debits equal credits.
 */
import { LEDGER_ACCOUNTS, LedgerAccount, MERCHANT_ACCOUNTS, MerchantAccount, Posting } from './ledger';
import type { Kopecks } from './money';

export type AccountBalances = Readonly<Record<LedgerAccount, Kopecks>>;

export const zeroAccountBalances = (): Record<LedgerAccount, Kopecks> =>
  Object.fromEntries(LEDGER_ACCOUNTS.map((a) => [a, 0])) as Record<LedgerAccount, Kopecks>;

const isLedgerAccount = (account: string): account is LedgerAccount => (LEDGER_ACCOUNTS as readonly string[]).includes(account);

// ---------------------------------------------------------------------------------
// Statements

/**
 * The running balances of one ledger over a statement: starts at the opening balances
 * (every entry at or before `from`), moves with each entry of the period in log order;
 * `closing()` is opening + movements.
 */
export class StatementBalances {
  private readonly balances: Record<LedgerAccount, Kopecks>;
  private readonly moved: Record<LedgerAccount, Kopecks> = zeroAccountBalances();
  private count = 0;

  constructor(readonly opening: AccountBalances) {
    this.balances = { ...opening };
  }

  /** Applies an entry's postings; returns the balances after it (a copy). */
  apply(postings: readonly { readonly account: string; readonly amount: Kopecks }[]): AccountBalances {
    for (const p of postings) {
      if (!isLedgerAccount(p.account)) throw new Error(`posting to unknown account ${p.account}`);
      this.balances[p.account] += p.amount;
      this.moved[p.account] += p.amount;
    }
    this.count++;
    return { ...this.balances };
  }

  /** The sum of the period's postings per account. */
  movements(): AccountBalances {
    return { ...this.moved };
  }

  closing(): AccountBalances {
    return { ...this.balances };
  }

  entries(): number {
    return this.count;
  }
}

/** A ledger's balances as of an instant: what `/balance?asOf=` answers. */
export interface BalancesAsOf {
  readonly balances: AccountBalances;
  /** The entries that occurred at or before the instant. */
  readonly entries: number;
  /** The latest `occurredAt` among them, as the entry carries it (the first in log order of equal instants); null: none. */
  readonly lastEntryAt: string | null;
}

/**
 * A ledger's balances as of an instant, folded from its entries in log order (an entry's
 * time is its cause's, so log order says nothing of time: every entry is offered): the
 * postings of those that occurred at or before it summed per account, as `evolve` sums
 * them, without the holds, reservations and causes it also keeps and the answer does not
 * show. Memory is one ledger's accounts, whatever the number of entries.
 */
export class BalancesAsOfFold {
  private readonly balances = zeroAccountBalances();
  private readonly limit: number;
  private entries = 0;
  private lastEntryAt: string | null = null;
  private last = 0;

  constructor(instant: Date) {
    this.limit = instant.getTime();
  }

  apply(entry: { readonly occurredAt: string; readonly postings: readonly { readonly account: LedgerAccount; readonly amount: Kopecks }[] }): void {
    const occurredAt = Date.parse(entry.occurredAt);
    if (occurredAt > this.limit) return;
    for (const p of entry.postings) this.balances[p.account] = this.balances[p.account] + p.amount;
    this.entries++;
    if (this.lastEntryAt === null || occurredAt > this.last) {
      this.lastEntryAt = entry.occurredAt;
      this.last = occurredAt;
    }
  }

  result(): BalancesAsOf {
    return { balances: { ...this.balances }, entries: this.entries, lastEntryAt: this.lastEntryAt };
  }
}

/** A movement of a merchant's balance: one posting of a ledger entry to one of its buckets. */
export interface BalanceMovement {
  readonly entryId: string;
  readonly kind: string;
  readonly cause: string;
  readonly occurredAt: string;
  readonly bucket: MerchantAccount;
  readonly amount: Kopecks;
}

/** The movements an entry makes: its postings to pending, available and reserved, in their order (system accounts left out). */
export const balanceMovementsOf = (
  entry: Omit<BalanceMovement, 'bucket' | 'amount'> & { readonly postings: readonly { readonly account: string; readonly amount: Kopecks }[] },
): BalanceMovement[] =>
  entry.postings
    .filter((p) => (MERCHANT_ACCOUNTS as readonly string[]).includes(p.account))
    .map((p) => ({
      entryId: entry.entryId,
      kind: entry.kind,
      cause: entry.cause,
      occurredAt: entry.occurredAt,
      bucket: p.account as MerchantAccount,
      amount: p.amount,
    }));

// ---------------------------------------------------------------------------------
// Trial balance

export interface TrialBalanceAccount {
  readonly account: LedgerAccount;
  /** Sum of the debits (negative postings), as a positive number of kopecks. */
  readonly debits: Kopecks;
  /** Sum of the credits (positive postings). */
  readonly credits: Kopecks;
  /** credits − debits: the account's balance in the ledger's sign convention. */
  readonly balance: Kopecks;
}

export interface TrialBalanceLedger {
  readonly accountId: string;
  readonly mode: string;
  readonly entries: number;
  readonly accounts: readonly TrialBalanceAccount[];
  readonly debits: Kopecks;
  readonly credits: Kopecks;
  /** Sum of every account's balance: 0 in a sound ledger. */
  readonly balance: Kopecks;
}

export interface TrialBalance {
  readonly ledgers: readonly TrialBalanceLedger[];
  readonly entries: number;
  readonly debits: Kopecks;
  readonly credits: Kopecks;
  readonly balance: Kopecks;
  /** Every ledger's debits equal its credits (and so overall). */
  readonly balanced: boolean;
}

/**
 * Folds journal entries of any number of ledgers into the trial balance: per ledger and
 * account, debit and credit turnovers and the balance. Memory grows with the number of
 * ledgers, not of entries.
 */
export class TrialBalanceFold {
  private readonly ledgers = new Map<
    string,
    { accountId: string; mode: string; entries: number; debits: Record<LedgerAccount, Kopecks>; credits: Record<LedgerAccount, Kopecks> }
  >();

  apply(ledger: { readonly accountId: string; readonly mode: string }, postings: readonly Posting[]): void {
    const key = `${ledger.mode}\u0000${ledger.accountId}`;
    let row = this.ledgers.get(key);
    if (!row)
      this.ledgers.set(
        key,
        (row = { accountId: ledger.accountId, mode: ledger.mode, entries: 0, debits: zeroAccountBalances(), credits: zeroAccountBalances() }),
      );
    for (const p of postings) {
      if (!isLedgerAccount(p.account)) throw new Error(`posting to unknown account ${String(p.account)}`);
      if (p.amount < 0) row.debits[p.account] -= p.amount;
      else row.credits[p.account] += p.amount;
    }
    row.entries++;
  }

  /** The trial balance, ledgers ordered by mode then account id. */
  result(): TrialBalance {
    const ledgers = [...this.ledgers.values()]
      .sort((a, b) => (a.mode === b.mode ? (a.accountId < b.accountId ? -1 : a.accountId > b.accountId ? 1 : 0) : a.mode < b.mode ? -1 : 1))
      .map((row): TrialBalanceLedger => {
        const accounts = LEDGER_ACCOUNTS.map((account) => ({
          account,
          debits: row.debits[account],
          credits: row.credits[account],
          balance: row.credits[account] - row.debits[account],
        }));
        const debits = accounts.reduce((s, a) => s + a.debits, 0);
        const credits = accounts.reduce((s, a) => s + a.credits, 0);
        return { accountId: row.accountId, mode: row.mode, entries: row.entries, accounts, debits, credits, balance: credits - debits };
      });
    const debits = ledgers.reduce((s, l) => s + l.debits, 0);
    const credits = ledgers.reduce((s, l) => s + l.credits, 0);
    return {
      ledgers,
      entries: ledgers.reduce((s, l) => s + l.entries, 0),
      debits,
      credits,
      balance: credits - debits,
      balanced: ledgers.every((l) => l.debits === l.credits),
    };
  }
}

// ---------------------------------------------------------------------------------
// Reconciliation

/** A paid invoice as its own stream tells it (read model). */
export interface PaidInvoiceFact {
  readonly invoiceId: string;
  readonly accountId: string;
  readonly mode: string;
  readonly netAmount: Kopecks;
  readonly feeAmount: Kopecks;
  readonly paidAt: string;
  /** When the hold ends; null: no hold. */
  readonly availableAt: string | null;
}

export interface SucceededRefundFact {
  readonly refundId: string;
  readonly invoiceId: string;
  readonly accountId: string;
  readonly mode: string;
  readonly amount: Kopecks;
}

export interface PaidPayoutFact {
  readonly payoutId: string;
  /** The ledger's reservation id of the payout (po_<id>). */
  readonly reservationId: string;
  readonly accountId: string;
  readonly mode: string;
  readonly amount: Kopecks;
  readonly feeAmount: Kopecks;
}

/** A journal entry of the kinds reconciled, with its postings. */
export interface EntryFact {
  readonly entryId: string;
  readonly accountId: string;
  readonly mode: string;
  readonly kind: string;
  readonly cause: string;
  readonly occurredAt: string;
  readonly postings: readonly { readonly account: string; readonly amount: Kopecks }[];
}

export interface ReconciliationInput {
  /**
   * The start of the period: a flow's entries are checked in the period they belong to
   * (a payment's in its paid period, a release's in its own), not again in a later one
   * that holds the invoice for its hold. Without it, from the beginning.
   */
  readonly from?: string;
  /** The end of the period: holds due at or before it must have been released. */
  readonly to: string;
  /** Flows of the period, and every entry their causes posted (whatever its time). */
  readonly paidInvoices: readonly PaidInvoiceFact[];
  readonly succeededRefunds: readonly SucceededRefundFact[];
  readonly paidPayouts: readonly PaidPayoutFact[];
  /**
   * Entries of the period of kinds payment_recorded, hold_released and
   * reservation_settled, plus those of the flows' causes. An entry whose flow is not
   * among the flows above is reported as `entry_without_flow`, so the caller passes,
   * besides the flows of the period, the flows of every entry it passes.
   */
  readonly entries: readonly EntryFact[];
  /** Ids of refunds and payouts that exist but did not succeed / are not paid, by reservation id: a settle of one of them is `entry_without_flow` with its status. */
  readonly otherReservations?: Readonly<Record<string, string>>;
}

export type ReconciliationDifferenceKind =
  /** A paid invoice, succeeded refund or paid payout without its entry. */
  | 'missing_entry'
  /** The entry's postings do not carry the flow's amounts. */
  | 'amount_differs'
  /** An entry whose flow did not happen (no such paid invoice, succeeded refund, paid payout). */
  | 'entry_without_flow'
  /** A paid invoice's hold due by the end of the period and not released. */
  | 'hold_not_released'
  /** A hold released before its invoice's availableAt. */
  | 'hold_released_early'
  /** A hold released for an invoice that had no hold (or no payment entry). */
  | 'release_without_hold'
  /** The entry is in another ledger than its flow's account and mode. */
  | 'ledger_differs';

export interface ReconciliationDifference {
  readonly kind: ReconciliationDifferenceKind;
  readonly flow: 'invoice' | 'refund' | 'payout';
  /** The flow's id: invoice id, refund id, payout id. */
  readonly flowId: string;
  readonly accountId: string;
  readonly mode: string;
  readonly entryId: string | null;
  readonly cause: string;
  /** What the flow says and what the ledger says (kopecks), when amounts differ. */
  readonly expected?: Readonly<Record<string, Kopecks>>;
  readonly actual?: Readonly<Record<string, Kopecks>>;
  readonly detail: string;
}

const sumOf = (postings: EntryFact['postings'], account: LedgerAccount): Kopecks =>
  postings.filter((p) => p.account === account).reduce((s, p) => s + p.amount, 0);

const sameAmounts = (a: Readonly<Record<string, Kopecks>>, b: Readonly<Record<string, Kopecks>>): boolean =>
  Object.keys(a).length === Object.keys(b).length && Object.keys(a).every((k) => a[k] === b[k]);

/**
 * How long after a hold is due its release may come and still count as released by a
 * period's end: the release worker posts it at its next tick (every 500 ms), dated then,
 * up to 100 a tick, one by one (a burst of holds due at once is released over seconds).
 */
export const HOLD_RELEASE_GRACE_MS = 60_000;

/** A flow of a reconciliation: a paid invoice, a succeeded refund or a paid payout. */
export type ReconciledFlow =
  | { readonly flow: 'invoice'; readonly fact: PaidInvoiceFact }
  | { readonly flow: 'refund'; readonly fact: SucceededRefundFact }
  | { readonly flow: 'payout'; readonly fact: PaidPayoutFact };

/** The causes of the entries a flow is compared with (in its own ledger). */
export function causesOfFlow(flow: ReconciledFlow): string[] {
  switch (flow.flow) {
    case 'invoice':
      return [`payment:${flow.fact.invoiceId}`, `hold_release:${flow.fact.invoiceId}`];
    case 'refund':
      return [`settle:${flow.fact.refundId}`];
    case 'payout':
      return [`settle:${flow.fact.reservationId}`];
  }
}

/** Whether an invoice's payment is held (its net in pending until availableAt, then released). */
export const isHeld = (invoice: PaidInvoiceFact): boolean => invoice.availableAt !== null && invoice.netAmount > 0;

/** The causes of the entries a flow explains (`flowDifferences` takes one entry of each): its payment's and, if held, its release's; its settlement's. */
export function causesExplainedBy(flow: ReconciledFlow): string[] {
  return flow.flow === 'invoice' && !isHeld(flow.fact) ? causesOfFlow(flow).slice(0, 1) : causesOfFlow(flow);
}

/** The reconciled period: (from, to]; without `from`, from the beginning. */
export interface ReconciliationPeriod {
  readonly from?: string;
  readonly to: string;
}

/**
 * A flow's entries by cause, among the entries given, in their order: the first of the
 * flow's own ledger (account and mode), else the first of any ledger (a `ledger_differs`).
 * Remembers every entry it handed out: an entry never handed out is one no flow explains.
 */
export class EntriesByCause {
  private readonly byCause = new Map<string, EntryFact>();
  private readonly anyLedgerByCause = new Map<string, EntryFact>();
  /** Ids of the entries handed out. */
  readonly used = new Set<string>();

  constructor(entries: Iterable<EntryFact>) {
    for (const e of entries) {
      const key = `${e.mode}\u0000${e.accountId}\u0000${e.cause}`;
      if (!this.byCause.has(key)) this.byCause.set(key, e);
      if (!this.anyLedgerByCause.has(e.cause)) this.anyLedgerByCause.set(e.cause, e);
    }
  }

  entryOf(flow: { readonly accountId: string; readonly mode: string }, cause: string): { entry: EntryFact | null; otherLedger: EntryFact | null } {
    const entry = this.byCause.get(`${flow.mode}\u0000${flow.accountId}\u0000${cause}`) ?? null;
    if (entry) {
      this.used.add(entry.entryId);
      return { entry, otherLedger: null };
    }
    const other = this.anyLedgerByCause.get(cause) ?? null;
    if (other) this.used.add(other.entryId);
    return { entry: null, otherLedger: other };
  }
}

const inPeriodOf = (period: ReconciliationPeriod) => (at: string) =>
  (period.from === undefined || Date.parse(at) > Date.parse(period.from)) && Date.parse(at) <= Date.parse(period.to);

/**
 * The causes whose entry in another ledger changes a flow's differences when its own
 * ledger has none (`ledger_differs` rather than `missing_entry`): its payment's if paid
 * in the period, its settlement's. Another ledger's hold release changes none (it is only
 * not reported as a release without a hold): a caller that reads entries by cause need not
 * look in every ledger for those.
 */
export function otherLedgerCausesNeeded(flow: ReconciledFlow, own: readonly EntryFact[], period: ReconciliationPeriod): string[] {
  const owned = (cause: string) => own.some((e) => e.cause === cause && e.accountId === flow.fact.accountId && e.mode === flow.fact.mode);
  const cause = causesOfFlow(flow)[0]!;
  if (flow.flow === 'invoice' && !inPeriodOf(period)(flow.fact.paidAt)) return [];
  return owned(cause) ? [] : [cause];
}

/**
 * One flow against its entries (looked up in `entries`, which records those it used):
 * each difference with its ids. A flow's entries are checked in the period they belong
 * to: a payment's where paid, a release's where made.
 */
export function flowDifferences(flow: ReconciledFlow, entries: EntriesByCause, period: ReconciliationPeriod): ReconciliationDifference[] {
  const differences: ReconciliationDifference[] = [];
  const push = (d: ReconciliationDifference) => differences.push(d);
  type Base = Pick<ReconciliationDifference, 'flow' | 'flowId' | 'accountId' | 'mode'>;
  /** A flow whose entry is not in its own ledger: posted in another one, or not at all. */
  const notPosted = (base: Base, cause: string, otherLedger: EntryFact | null, elsewhere: (other: EntryFact) => string, missing: string) =>
    push(
      otherLedger
        ? { ...base, kind: 'ledger_differs', entryId: otherLedger.entryId, cause, detail: elsewhere(otherLedger) }
        : { ...base, kind: 'missing_entry', entryId: null, cause, detail: missing },
    );
  /** The entry's sums on the accounts the flow names, against the flow's; a posting on any other account differs too. */
  const compareAmounts = (base: Base, entry: EntryFact, cause: string, expected: Readonly<Record<string, Kopecks>>, detail: string, kindMatches = true) => {
    const actual = Object.fromEntries(Object.keys(expected).map((account) => [account, sumOf(entry.postings, account as LedgerAccount)]));
    if (!kindMatches || !sameAmounts(expected, actual) || entry.postings.some((p) => !(p.account in expected))) {
      push({ ...base, kind: 'amount_differs', entryId: entry.entryId, cause, expected, actual, detail });
    }
  };
  const inPeriod = inPeriodOf(period);

  if (flow.flow === 'invoice') {
    const invoice = flow.fact;
    const base = { flow: 'invoice' as const, flowId: invoice.invoiceId, accountId: invoice.accountId, mode: invoice.mode };
    const cause = `payment:${invoice.invoiceId}`;
    const { entry, otherLedger } = entries.entryOf(invoice, cause);
    const held = isHeld(invoice);
    // An invoice here for its hold only (due in the period, or released in it): its payment is its paid period's.
    const paymentHere = inPeriod(invoice.paidAt);
    if (paymentHere && !entry) {
      notPosted(
        base,
        cause,
        otherLedger,
        (other) => `Проводка оплаты счёта в журнале ${other.mode}/${other.accountId}, а не ${invoice.mode}/${invoice.accountId}`,
        'Счёт оплачен, проводки payment_recorded нет',
      );
    } else if (paymentHere && entry) {
      const expected = {
        acquiring_clearing: -(invoice.netAmount + invoice.feeAmount),
        pending: held ? invoice.netAmount : 0,
        available: held ? 0 : invoice.netAmount,
        fees: invoice.feeAmount,
      };
      compareAmounts(base, entry, cause, expected, 'Суммы проводки оплаты не совпадают с суммами счёта', entry.kind === 'payment_recorded');
    }
    // Its hold, as the invoice states it (whether or not its payment entry is there): released once due, never before.
    if (held) {
      const release = entries.entryOf(invoice, `hold_release:${invoice.invoiceId}`).entry;
      // Due HOLD_RELEASE_GRACE_MS before `to` and not released by `to` (released later, or not yet): the same answer
      // whenever it is asked. A hold due within the grace may be waiting for the worker's next tick.
      const releasedLate = release !== null && Date.parse(release.occurredAt) > Date.parse(period.to);
      if ((!release || releasedLate) && Date.parse(invoice.availableAt!) <= Date.parse(period.to) - HOLD_RELEASE_GRACE_MS) {
        push({
          ...base,
          kind: 'hold_not_released',
          entryId: entry?.entryId ?? null,
          cause: `hold_release:${invoice.invoiceId}`,
          // Not when it was released later: the answer of a closed period is the same whenever it is asked.
          detail: `Удержание до ${invoice.availableAt} не снято к ${period.to}`,
        });
      }
      // A release is checked in its own period.
      if (release && inPeriod(release.occurredAt)) {
        if (Date.parse(release.occurredAt) < Date.parse(invoice.availableAt!)) {
          push({
            ...base,
            kind: 'hold_released_early',
            entryId: release.entryId,
            cause: release.cause,
            detail: `Удержание снято ${release.occurredAt}, раньше ${invoice.availableAt}`,
          });
        }
        const releasedExpected = { pending: -invoice.netAmount, available: invoice.netAmount };
        const releasedActual = { pending: sumOf(release.postings, 'pending'), available: sumOf(release.postings, 'available') };
        if (!sameAmounts(releasedExpected, releasedActual) || release.postings.some((p) => !(p.account in releasedExpected))) {
          push({
            ...base,
            kind: 'amount_differs',
            entryId: release.entryId,
            cause: release.cause,
            expected: releasedExpected,
            actual: releasedActual,
            detail: 'Снято не то, что удержано',
          });
        }
      }
    }
  } else if (flow.flow === 'refund') {
    const refund = flow.fact;
    const base = { flow: 'refund' as const, flowId: refund.refundId, accountId: refund.accountId, mode: refund.mode };
    const cause = `settle:${refund.refundId}`;
    const { entry, otherLedger } = entries.entryOf(refund, cause);
    if (!entry) {
      notPosted(
        base,
        cause,
        otherLedger,
        (other) => `Проводка возврата в журнале ${other.mode}/${other.accountId}`,
        'Возврат выполнен, проводки refunds_paid нет',
      );
    } else {
      compareAmounts(base, entry, cause, { reserved: -refund.amount, refunds_paid: refund.amount }, 'Сумма в refunds_paid не равна сумме возврата');
    }
  } else {
    const payout = flow.fact;
    const base = { flow: 'payout' as const, flowId: payout.payoutId, accountId: payout.accountId, mode: payout.mode };
    const cause = `settle:${payout.reservationId}`;
    const { entry, otherLedger } = entries.entryOf(payout, cause);
    if (!entry) {
      notPosted(
        base,
        cause,
        otherLedger,
        (other) => `Проводка выплаты в журнале ${other.mode}/${other.accountId}`,
        'Выплата проведена, проводки payouts_sent нет',
      );
    } else {
      compareAmounts(
        base,
        entry,
        cause,
        { reserved: -payout.amount, payouts_sent: payout.amount - payout.feeAmount, fees: payout.feeAmount },
        'Суммы в payouts_sent и fees не равны сумме и комиссии выплаты',
      );
    }
  }
  return differences;
}

/** What is known of the flow an entry's cause names, for an entry that no flow used. */
export interface NamedFlowState {
  /** Its cause names an invoice among the reconciled flows (paid). */
  readonly invoiceIsFlow: boolean;
  /** The status of the refund or payout it names, when that exists and did not succeed / is not paid. */
  readonly reservationStatus?: string;
}

/** An entry that no flow used: its difference (null for an entry of a kind not reconciled). */
export function unusedEntryDifference(entry: EntryFact, named: NamedFlowState): ReconciliationDifference | null {
  const base = { accountId: entry.accountId, mode: entry.mode, entryId: entry.entryId, cause: entry.cause };
  const [prefix, id = ''] = splitCause(entry.cause);
  if (entry.kind === 'payment_recorded' || prefix === 'payment') {
    return {
      ...base,
      kind: 'entry_without_flow',
      flow: 'invoice',
      flowId: id,
      detail: named.invoiceIsFlow ? 'Проводка оплаты в другом журнале' : 'Проводка оплаты, а счёт не оплачен',
    };
  } else if (entry.kind === 'hold_released' || prefix === 'hold_release') {
    return { ...base, kind: 'release_without_hold', flow: 'invoice', flowId: id, detail: 'Снятие удержания, а у счёта нет удержания или он не оплачен' };
  } else if (entry.kind === 'reservation_settled' || prefix === 'settle') {
    const isPayout = id.startsWith('po_');
    const status = named.reservationStatus;
    return {
      ...base,
      kind: 'entry_without_flow',
      flow: isPayout ? 'payout' : 'refund',
      flowId: isPayout ? id.slice(3) : id,
      detail: isPayout
        ? `Списание в payouts_sent, а выплата ${status ? `в статусе ${status}` : 'не найдена'}`
        : `Списание в refunds_paid, а возврат ${status ? `в статусе ${status}` : 'не найден'}`,
    };
  }
  return null;
}

/** The order of a reconciliation's differences: by flow id, kind, entry id. */
export const compareDifferences = (a: ReconciliationDifference, b: ReconciliationDifference): number =>
  cmp(a.flowId, b.flowId) || cmp(a.kind, b.kind) || cmp(a.entryId ?? '', b.entryId ?? '');

/**
 * Pairs every flow with the entry its cause posted and every entry with its flow, and
 * lists each difference with its ids. Causes: `payment:<invoiceId>` (payment_recorded),
 * `hold_release:<invoiceId>` (hold_released), `settle:<refundId>` and
 * `settle:po_<payoutId>` (reservation_settled). The differences come sorted by flow
 * id, kind and entry id, so the same input always gives the same list. The whole input
 * at once: a report over a long period pairs it in pages from the same pieces
 * (`flowDifferences`, `unusedEntryDifference`).
 */
export function reconcile(input: ReconciliationInput): ReconciliationDifference[] {
  const entries = new EntriesByCause(input.entries);
  const differences: ReconciliationDifference[] = [];
  for (const fact of input.paidInvoices) differences.push(...flowDifferences({ flow: 'invoice', fact }, entries, input));
  for (const fact of input.succeededRefunds) differences.push(...flowDifferences({ flow: 'refund', fact }, entries, input));
  for (const fact of input.paidPayouts) differences.push(...flowDifferences({ flow: 'payout', fact }, entries, input));

  // Entries whose flow did not happen.
  const invoices = new Set(input.paidInvoices.map((i) => i.invoiceId));
  for (const entry of input.entries) {
    if (entries.used.has(entry.entryId)) continue;
    const [, id = ''] = splitCause(entry.cause);
    const difference = unusedEntryDifference(entry, { invoiceIsFlow: invoices.has(id), reservationStatus: input.otherReservations?.[id] });
    if (difference) differences.push(difference);
  }
  return differences.sort(compareDifferences);
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function splitCause(cause: string): [string, string] {
  const at = cause.indexOf(':');
  return at < 0 ? [cause, ''] : [cause.slice(0, at), cause.slice(at + 1)];
}
