import type { Pool, PoolClient } from 'pg';
import { isUuid, payoutReservationId } from '#domain';
import { RebuildState, rebuildStateSql, refuseRebuilt } from '#event-store/projections';
import { REPORTED_READ_MODELS, REPORTED_TABLES } from './posted-through';
import { lockReadModelTables } from '../read-models/table-locks';
import {
  causesExplainedBy,
  causesOfFlow,
  compareDifferences,
  EntriesByCause,
  EntryFact,
  flowDifferences,
  HOLD_RELEASE_GRACE_MS,
  otherLedgerCausesNeeded,
  PaidInvoiceFact,
  PaidPayoutFact,
  ReconciledFlow,
  ReconciliationDifference,
  ReconciliationPeriod,
  SucceededRefundFact,
  unusedEntryDifference,
} from '#ledger';
import { ENTRY_POSTINGS } from '../ledger/ledger.read-model';

export interface ReconciliationReport {
  readonly from: string;
  readonly to: string;
  readonly checked: { readonly paidInvoices: number; readonly succeededRefunds: number; readonly paidPayouts: number; readonly entries: number };
  readonly differences: readonly ReconciliationDifference[];
}

/** Rows of the period (flows of one kind, or entries) read and paired at a time. */
export const RECONCILIATION_PAGE_ROWS = 1_000;

/** One page of a reconciliation, as it was paired. */
export interface ReconciliationPage {
  /** The period's flows of one kind, or the period's entries. */
  readonly part: 'invoices' | 'refunds' | 'payouts' | 'entries';
  /** Rows of the period in the page (at most the page size). */
  readonly rows: number;
  /** Rows read for them: their counterparts (entries by cause, or the flows the entries name). */
  readonly lookedUp: number;
}

export interface ReconcileOptions {
  /** Rows of the period paired at a time (default RECONCILIATION_PAGE_ROWS). */
  readonly pageRows?: number;
  /** Told after each page is paired, before the next is read. */
  readonly onPage?: (page: ReconciliationPage) => void;
}

const RECONCILED_KINDS = ['payment_recorded', 'hold_released', 'reservation_settled'];

/** A reconciled entry, whether it is one of the period's (of a reconciled kind, dated in it), its place in its ledger and in the log. */
type Candidate = EntryFact & { readonly inPeriod: boolean; readonly seq: bigint; readonly logPosition: readonly [bigint, bigint] };

type EntryRow = {
  entry_id: string;
  account_id: string;
  mode: string;
  kind: string;
  cause: string;
  occurred_at: Date;
  postings: { account: string; amount: number }[];
  in_period: boolean;
  seq: string;
  log_position: string;
};
/** The entry columns; $1, $2, $3 of every entry query are the reconciled kinds, `from` and `to`. */
const ENTRY_COLUMNS = `e.entry_id, e.account_id, e.mode, e.kind, e.cause, e.occurred_at, e.seq, e.log_position,
  ${ENTRY_POSTINGS} AS postings,
  (e.kind = ANY($1) AND e.occurred_at > $2 AND e.occurred_at <= $3) AS in_period`;
const IN_PERIOD = `e.kind = ANY($1) AND e.occurred_at > $2 AND e.occurred_at <= $3`;
/** An entry of the period, with the first entry of its ledger and cause (the period's first, then in ledger order): the one its flow takes. */
type PeriodEntryRow = EntryRow & { first_of_cause: string };
const PERIOD_ENTRY_COLUMNS = `${ENTRY_COLUMNS},
  (SELECT x.entry_id FROM ledger_entries x WHERE x.account_id = e.account_id AND x.mode = e.mode AND x.cause = e.cause
   ORDER BY (x.kind = ANY($1) AND x.occurred_at > $2 AND x.occurred_at <= $3) DESC, x.seq LIMIT 1)::text AS first_of_cause`;
const candidate = (r: EntryRow): Candidate => ({
  entryId: r.entry_id,
  accountId: r.account_id,
  mode: r.mode,
  kind: r.kind,
  cause: r.cause,
  occurredAt: r.occurred_at.toISOString(),
  postings: r.postings.map((p) => ({ account: p.account, amount: Number(p.amount) })),
  inPeriod: r.in_period,
  seq: BigInt(r.seq),
  logPosition: logPositionOf(r.log_position),
});
/** `commit/prepare`, as the ledger projection stores it. */
function logPositionOf(text: string): [bigint, bigint] {
  const [commit = '0', prepare = '0'] = text.split('/');
  return /^\d+$/.test(commit) && /^\d+$/.test(prepare) ? [BigInt(commit), BigInt(prepare)] : [0n, 0n];
}

/** The flow columns; $1, $2 of every flow query are `from` and `to`, and of the invoices' $3, $4 the bounds of the holds due (each HOLD_RELEASE_GRACE_MS earlier). */
type InvoiceRow = {
  id: string;
  account_id: string;
  mode: string;
  paid_at: Date | null;
  status: string;
  net: string | null;
  fee: string | null;
  available_at: Date | null;
  in_period: boolean;
};
const INVOICES_OF_THE_PERIOD = `paid_at > $1 AND paid_at <= $2 OR paid_at IS NOT NULL AND available_at > $3 AND available_at <= $4`;
const INVOICE_COLUMNS = `id::text, account_id::text, mode, paid_at, status, net_amount AS net, fee_amount AS fee, available_at,
  COALESCE(${INVOICES_OF_THE_PERIOD}, false) AS in_period`;
const invoiceFact = (r: InvoiceRow): PaidInvoiceFact => ({
  invoiceId: r.id,
  accountId: r.account_id,
  mode: r.mode,
  netAmount: Number(r.net ?? 0),
  feeAmount: Number(r.fee ?? 0),
  paidAt: r.paid_at!.toISOString(),
  availableAt: r.available_at?.toISOString() ?? null,
});

type RefundRow = { id: string; invoice_id: string; account_id: string; mode: string; amount: string; status: string; in_period: boolean };
const REFUNDS_OF_THE_PERIOD = `status = 'succeeded' AND completed_at > $1 AND completed_at <= $2`;
const REFUND_COLUMNS = `id, invoice_id::text, account_id::text, mode, amount, status, COALESCE(${REFUNDS_OF_THE_PERIOD}, false) AS in_period`;
const refundFact = (r: RefundRow): SucceededRefundFact => ({
  refundId: r.id,
  invoiceId: r.invoice_id,
  accountId: r.account_id,
  mode: r.mode,
  amount: Number(r.amount),
});

type PayoutRow = { id: string; account_id: string; status: string; amount: string; fee: string; in_period: boolean };
const PAYOUTS_OF_THE_PERIOD = `status = 'paid' AND processed_at > $1 AND processed_at <= $2`;
const PAYOUT_COLUMNS = `id::text, account_id::text, status, amount, fee_amount AS fee, COALESCE(${PAYOUTS_OF_THE_PERIOD}, false) AS in_period`;
const payoutFact = (r: PayoutRow): PaidPayoutFact => ({
  payoutId: r.id,
  reservationId: payoutReservationId(Number(r.id)),
  accountId: r.account_id,
  mode: 'live',
  amount: Number(r.amount),
  feeAmount: Number(r.fee),
});

/** A flow to pair with its entries. */
interface FlowToPair {
  readonly flow: ReconciledFlow;
  /** One of the period's flows (else one that an entry of the period names). */
  readonly ofThePeriod: boolean;
}

/** A flow paired with its entries: its differences, the entries it explains, its own ledger's entries of its causes, the others read. */
interface PairedFlow {
  readonly differences: readonly ReconciliationDifference[];
  readonly used: ReadonlySet<string>;
  readonly own: readonly Candidate[];
  readonly others: readonly Candidate[];
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const cmpBig = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0);
/** The order in which a flow takes its own ledger's entries of a cause: the period's first, then in the ledger's order. */
const byPriority = (a: Candidate, b: Candidate): number => (a.inPeriod === b.inPeriod ? cmpBig(a.seq, b.seq) : a.inPeriod ? -1 : 1);
/** And other ledgers' entries of the period (when its own has none): in log order. */
const inLogOrder = (a: Candidate, b: Candidate): number =>
  cmpBig(a.logPosition[0], b.logPosition[0]) || cmpBig(a.logPosition[1], b.logPosition[1]) || cmp(a.entryId, b.entryId);
const ledgerKey = (x: { readonly accountId: string; readonly mode: string }) => `${x.mode}\u0000${x.accountId}`;
const flowKey = (f: ReconciledFlow) => `${f.flow}\u0000${f.flow === 'invoice' ? f.fact.invoiceId : f.flow === 'refund' ? f.fact.refundId : f.fact.payoutId}`;
const yieldToOthers = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The flow an entry's cause names: an invoice (its id a UUID), a refund or a payout (po_<id>). */
function namedBy(cause: string): { readonly flow: 'invoice' | 'refund' | 'payout'; readonly id: string } | null {
  const at = cause.indexOf(':');
  const prefix = cause.slice(0, at);
  const id = cause.slice(at + 1);
  if (prefix === 'payment' || prefix === 'hold_release') return isUuid(id) ? { flow: 'invoice', id } : null;
  // Only a canonical payout id names a payout (po_<id> of the payout's own reservation).
  if (prefix === 'settle' && /^po_\d{1,18}$/.test(id)) return String(Number(id.slice(3))) === id.slice(3) ? { flow: 'payout', id: id.slice(3) } : null;
  if (prefix === 'settle' && !id.startsWith('po_')) return { flow: 'refund', id };
  return null;
}

/** The read models reconciliation reads (their tables locked before its snapshot). */
const RECONCILED_MODELS = Object.values(REPORTED_READ_MODELS).map((m) => m.name);

/**
 * Reconciles the period (from, to] from the read models, in one REPEATABLE READ
 * snapshot, in pages of at most `pageRows` rows of the period, each paired before the
 * next is read and the event loop let go in between, so that neither memory nor the time
 * the process is held grows with the period:
 *
 * 1. the flows of the period (invoices paid or their holds due, refunds succeeded,
 *    payouts paid in it), page by page, each with its own ledger's entries of its causes
 *    whatever their time (the cause index) and, only where that decides a difference,
 *    another ledger's entry of the period with its cause;
 * 2. the entries of the period (payment_recorded, hold_released, reservation_settled),
 *    page by page, each with the flow it names (by primary key) and that flow's entries:
 *    an entry no flow explains is reported, and a flow of another time that the entries
 *    name is paired once, at the first of them (by entry id).
 *
 * The pairing is the pure one of libs/ledger (`flowDifferences`, `unusedEntryDifference`),
 * the same as `reconcile` over the whole input at once.
 */
export async function reconcilePeriod(pool: Pick<Pool, 'connect'>, from: Date, to: Date, options: ReconcileOptions = {}): Promise<ReconciliationReport> {
  const pageRows = options.pageRows ?? RECONCILIATION_PAGE_ROWS;
  const client = await pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    // Before the snapshot: a reset's TRUNCATE committed before it (its mark seen below) or waits for this to end.
    await lockReadModelTables(client, REPORTED_TABLES);
    const state = await client.query<{ rebuild: RebuildState }>(`SELECT ${rebuildStateSql('$1')} AS rebuild`, [RECONCILED_MODELS]);
    refuseRebuilt(RECONCILED_MODELS, state.rows[0]!.rebuild);
    const period: ReconciliationPeriod = { from: from.toISOString(), to: to.toISOString() };
    const reader = new PeriodReader(client, from, to);
    const differences: ReconciliationDifference[] = [];
    const checked = { paidInvoices: 0, succeededRefunds: 0, paidPayouts: 0, entries: 0 };
    const count = (flow: ReconciledFlow) => {
      if (flow.flow === 'invoice') checked.paidInvoices++;
      else if (flow.flow === 'refund') checked.succeededRefunds++;
      else checked.paidPayouts++;
    };
    /**
     * A flow's own entries not of the period (the period's are reported with them, step 2), up to its end: counted, and
     * reported if the flow does not explain them. A later one belongs to the period it is dated in, which reports it: a
     * closed period's answer does not change as entries come (docs/finance-reports.md).
     */
    const ownOutsideThePeriod = (flow: ReconciledFlow, paired: PairedFlow) => {
      for (const e of paired.own) {
        if (e.inPeriod || Date.parse(e.occurredAt) > to.getTime()) continue;
        checked.entries++;
        if (paired.used.has(e.entryId)) continue;
        const difference = unusedEntryDifference(e, { invoiceIsFlow: flow.flow === 'invoice' });
        if (difference) differences.push(difference);
      }
    };

    // 1. The flows of the period.
    const parts = [
      {
        part: 'invoices',
        table: 'invoices',
        columns: INVOICE_COLUMNS,
        where: INVOICES_OF_THE_PERIOD,
        flow: (r: InvoiceRow) => ({ flow: 'invoice', fact: invoiceFact(r) }),
      },
      {
        part: 'refunds',
        table: 'refunds',
        columns: REFUND_COLUMNS,
        where: REFUNDS_OF_THE_PERIOD,
        flow: (r: RefundRow) => ({ flow: 'refund', fact: refundFact(r) }),
      },
      {
        part: 'payouts',
        table: 'payouts',
        columns: PAYOUT_COLUMNS,
        where: PAYOUTS_OF_THE_PERIOD,
        flow: (r: PayoutRow) => ({ flow: 'payout', fact: payoutFact(r) }),
      },
    ] as const;
    for (const part of parts) {
      const sql = `SELECT ${part.columns} FROM ${part.table} WHERE ${part.where}`;
      const params = reader.flowParams(part.part === 'invoices');
      for await (const rows of reader.pages<InvoiceRow & RefundRow & PayoutRow>(`reconciled_${part.part}`, sql, params, pageRows)) {
        const flows = rows.map((r): FlowToPair => ({ flow: part.flow(r) as ReconciledFlow, ofThePeriod: true }));
        const paired = await reader.pair(flows, period, () => false);
        flows.forEach((f, i) => {
          count(f.flow);
          differences.push(...paired[i]!.differences);
          ownOutsideThePeriod(f.flow, paired[i]!);
        });
        options.onPage?.({ part: part.part, rows: rows.length, lookedUp: paired.reduce((n, p) => n + p.own.length + p.others.length, 0) });
        await yieldToOthers();
      }
    }

    // 2. The entries of the period.
    const entriesSql = `SELECT ${PERIOD_ENTRY_COLUMNS} FROM ledger_entries e WHERE ${IN_PERIOD}`;
    for await (const rows of reader.pages<PeriodEntryRow>('reconciled_entries', entriesSql, reader.entryParams(), pageRows)) {
      const entries = rows.map((r) => ({ ...candidate(r), firstOfCause: r.first_of_cause }));
      checked.entries += entries.length;
      const named = await reader.namedFlows(entries.map((e) => e.cause));
      // An entry in its flow's ledger, the flow one of the period's (paired in step 1): the flow takes the first entry of
      // each cause it explains. A flow of another time (paired here), or an entry in another ledger than its flow's (all
      // ledgers' entries of the flow needed): the flow paired with its entries, once each.
      const flows = new Map<string, FlowToPair & { strayHere: boolean }>();
      for (const e of entries) {
        const flow = named.flowOf(e.cause);
        const stray = flow !== null && ledgerKey(e) !== ledgerKey(flow.flow.fact);
        if (!flow || (flow.ofThePeriod && !stray)) continue;
        const key = flowKey(flow.flow);
        const known = flows.get(key);
        if (known) known.strayHere ||= stray;
        else flows.set(key, { ...flow, strayHere: stray });
      }
      const list = [...flows.values()];
      const paired = await reader.pair(list, period, (i, own) => list[i]!.strayHere || (!list[i]!.ofThePeriod && !own.some((e) => e.inPeriod)));
      const pairedBy = new Map(list.map((f, i) => [flowKey(f.flow), paired[i]!]));
      for (const e of entries) {
        const flow = named.flowOf(e.cause);
        const pairing = flow ? (pairedBy.get(flowKey(flow.flow)) ?? null) : null;
        const used = pairing ? pairing.used.has(e.entryId) : flow !== null && causesExplainedBy(flow.flow).includes(e.cause) && e.firstOfCause === e.entryId;
        if (!used) {
          const difference = unusedEntryDifference(e, { invoiceIsFlow: flow?.flow.flow === 'invoice', reservationStatus: named.statusOf(e.cause) });
          if (difference) differences.push(difference);
        }
        // A flow of another time, named by the period's entries: paired at the first of them (its own ledger's, else any).
        if (flow && pairing && !flow.ofThePeriod && firstOfThePeriod(pairing) === e.entryId) {
          count(flow.flow);
          differences.push(...pairing.differences);
          ownOutsideThePeriod(flow.flow, pairing);
        }
      }
      options.onPage?.({
        part: 'entries',
        rows: rows.length,
        lookedUp: named.rows + paired.reduce((n, p) => n + p.own.length + p.others.length, 0),
      });
      await yieldToOthers();
    }

    return { from: period.from!, to: period.to, checked, differences: differences.sort(compareDifferences) };
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}

/** The first of the period's entries that name a flow: its own ledger's if any, else another's. */
function firstOfThePeriod(paired: PairedFlow): string | undefined {
  const own = paired.own.filter((e) => e.inPeriod);
  const pool = own.length > 0 ? own : paired.others;
  return pool.map((e) => e.entryId).sort(cmp)[0];
}

/** The reads of one reconciliation, in its snapshot. */
class PeriodReader {
  /** Every ledger (account and mode), read once if an entry of a cause is wanted in every ledger. */
  private ledgers: Promise<{ accountIds: string[]; modes: string[] }> | null = null;
  private readonly dueFrom: Date;
  private readonly dueTo: Date;

  constructor(
    private readonly client: PoolClient,
    private readonly from: Date,
    private readonly to: Date,
  ) {
    [this.dueFrom, this.dueTo] = [from, to].map((at) => new Date(at.getTime() - HOLD_RELEASE_GRACE_MS)) as [Date, Date];
  }

  /** `from`, `to`, and for invoices the bounds of the holds due. */
  flowParams(invoices: boolean): unknown[] {
    return invoices ? [this.from, this.to, this.dueFrom, this.dueTo] : [this.from, this.to];
  }

  entryParams(): unknown[] {
    return [RECONCILED_KINDS, this.from, this.to];
  }

  private async q<R extends object>(text: string, values: unknown[]): Promise<R[]> {
    return (await this.client.query<R>(text, values)).rows;
  }

  /** The rows of a query, `pageRows` at a time, through a cursor of the snapshot (one scan). */
  async *pages<R extends object>(cursor: string, text: string, values: unknown[], pageRows: number): AsyncGenerator<R[]> {
    await this.client.query(`DECLARE ${cursor} NO SCROLL CURSOR FOR ${text}`, values);
    try {
      for (;;) {
        const rows = await this.q<R>(`FETCH ${pageRows} FROM ${cursor}`, []);
        if (rows.length > 0) yield rows;
        if (rows.length < pageRows) return;
      }
    } finally {
      await this.client.query(`CLOSE ${cursor}`).catch(() => undefined);
    }
  }

  /** Entries of these causes in these ledgers (the cause index), whatever their time. */
  private async ownEntries(wanted: readonly [string, string, string][]): Promise<Candidate[]> {
    if (wanted.length === 0) return [];
    const rows = await this.q<EntryRow>(
      `SELECT ${ENTRY_COLUMNS} FROM unnest($4::text[], $5::text[], $6::text[]) AS w(account_id, mode, cause)
         CROSS JOIN LATERAL (SELECT * FROM ledger_entries e WHERE e.account_id = w.account_id AND e.mode = w.mode AND e.cause = w.cause OFFSET 0) e`,
      [...this.entryParams(), wanted.map((t) => t[0]), wanted.map((t) => t[1]), wanted.map((t) => t[2])],
    );
    return rows.map(candidate);
  }

  /** The period's entries of these causes in any ledger: the cause index, ledger by ledger. */
  private async periodEntriesOfCauses(causes: readonly string[]): Promise<Candidate[]> {
    if (causes.length === 0) return [];
    this.ledgers ??= this.q<{ account_id: string; mode: string }>(
      `WITH RECURSIVE l AS (
         (SELECT account_id, mode FROM ledger_entries ORDER BY account_id, mode LIMIT 1)
         UNION ALL
         SELECT n.account_id, n.mode FROM l CROSS JOIN LATERAL (
           SELECT e.account_id, e.mode FROM ledger_entries e WHERE (e.account_id, e.mode) > (l.account_id, l.mode)
           ORDER BY e.account_id, e.mode LIMIT 1) n)
       SELECT account_id, mode FROM l`,
      [],
    ).then((rows) => ({ accountIds: rows.map((r) => r.account_id), modes: rows.map((r) => r.mode) }));
    const ledgers = await this.ledgers;
    const rows = await this.q<EntryRow>(
      `SELECT ${ENTRY_COLUMNS} FROM unnest($4::text[], $5::text[]) AS l(account_id, mode)
         CROSS JOIN LATERAL (SELECT * FROM ledger_entries e WHERE e.account_id = l.account_id AND e.mode = l.mode AND e.cause = ANY($6::text[]) OFFSET 0) e
       WHERE ${IN_PERIOD}`,
      [...this.entryParams(), ledgers.accountIds, ledgers.modes, [...new Set(causes)]],
    );
    return rows.map(candidate);
  }

  /**
   * Pairs each flow with its entries: its own ledger's of its causes (all of them; for a
   * refund or payout of another time only the period's, as it is named by them), and the
   * period's in other ledgers of the causes where that decides a difference, or of all its
   * causes when `everyLedger` says so (to tell which of them it explains).
   */
  async pair(
    flows: readonly FlowToPair[],
    period: ReconciliationPeriod,
    everyLedger: (index: number, own: readonly Candidate[]) => boolean,
  ): Promise<PairedFlow[]> {
    const wanted = new Map<string, [string, string, string]>();
    for (const f of flows) {
      for (const cause of causesOfFlow(f.flow)) wanted.set(`${ledgerKey(f.flow.fact)}\u0000${cause}`, [f.flow.fact.accountId, f.flow.fact.mode, cause]);
    }
    const byKey = new Map<string, Candidate[]>();
    for (const e of await this.ownEntries([...wanted.values()])) {
      const key = `${ledgerKey(e)}\u0000${e.cause}`;
      byKey.set(key, [...(byKey.get(key) ?? []), e]);
    }
    const own = flows.map((f) =>
      causesOfFlow(f.flow)
        .flatMap((cause) => byKey.get(`${ledgerKey(f.flow.fact)}\u0000${cause}`) ?? [])
        .filter((e) => f.ofThePeriod || f.flow.flow === 'invoice' || e.inPeriod)
        .sort(byPriority),
    );
    const needed = flows.map((f, i) => (everyLedger(i, own[i]!) ? causesOfFlow(f.flow) : otherLedgerCausesNeeded(f.flow, own[i]!, period)));
    const byCause = new Map<string, Candidate[]>();
    for (const e of await this.periodEntriesOfCauses(needed.flat())) byCause.set(e.cause, [...(byCause.get(e.cause) ?? []), e]);
    return flows.map((f, i) => {
      const others = needed[i]!.flatMap((cause) => (byCause.get(cause) ?? []).filter((e) => ledgerKey(e) !== ledgerKey(f.flow.fact))).sort(inLogOrder);
      const entries = new EntriesByCause([...own[i]!, ...others]);
      return { differences: flowDifferences(f.flow, entries, period), used: entries.used, own: own[i]!, others };
    });
  }

  /** The flows the causes name (by primary key): those that are flows (paid, succeeded), and the others' statuses. */
  async namedFlows(causes: readonly string[]): Promise<{
    flowOf(cause: string): FlowToPair | null;
    statusOf(cause: string): string | undefined;
    rows: number;
  }> {
    const ids = { invoice: new Set<string>(), refund: new Set<string>(), payout: new Set<string>() };
    for (const cause of causes) {
      const named = namedBy(cause);
      if (named) ids[named.flow].add(named.id);
    }
    const flows = new Map<string, FlowToPair>();
    const statuses = new Map<string, string>();
    const invoices =
      ids.invoice.size === 0
        ? []
        : await this.q<InvoiceRow>(`SELECT ${INVOICE_COLUMNS} FROM invoices WHERE id = ANY($5::uuid[])`, [...this.flowParams(true), [...ids.invoice]]);
    for (const r of invoices)
      if (r.paid_at !== null && ids.invoice.has(r.id))
        flows.set(`invoice:${r.id}`, { flow: { flow: 'invoice', fact: invoiceFact(r) }, ofThePeriod: r.in_period });
    const refunds =
      ids.refund.size === 0
        ? []
        : await this.q<RefundRow>(`SELECT ${REFUND_COLUMNS} FROM refunds WHERE id = ANY($3::text[])`, [...this.flowParams(false), [...ids.refund]]);
    for (const r of refunds) {
      if (r.status === 'succeeded') flows.set(`refund:${r.id}`, { flow: { flow: 'refund', fact: refundFact(r) }, ofThePeriod: r.in_period });
      else statuses.set(`refund:${r.id}`, r.status);
    }
    const payouts =
      ids.payout.size === 0
        ? []
        : await this.q<PayoutRow>(`SELECT ${PAYOUT_COLUMNS} FROM payouts WHERE id = ANY($3::bigint[])`, [...this.flowParams(false), [...ids.payout]]);
    for (const r of payouts) {
      if (r.status === 'paid') flows.set(`payout:${r.id}`, { flow: { flow: 'payout', fact: payoutFact(r) }, ofThePeriod: r.in_period });
      else statuses.set(`payout:${r.id}`, r.status);
    }
    const keyOf = (cause: string) => {
      const named = namedBy(cause);
      return named ? `${named.flow}:${named.id}` : '';
    };
    return {
      flowOf: (cause) => flows.get(keyOf(cause)) ?? null,
      statusOf: (cause) => statuses.get(keyOf(cause)),
      rows: invoices.length + refunds.length + payouts.length,
    };
  }
}
