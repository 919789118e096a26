import type { Pool, PoolClient } from 'pg';
import type { Migration } from '#platform/database';
import { StreamNotFoundError } from '#event-store';
import type { EventStore, RecordedEvent } from '#event-store';
import { LEDGER_CATEGORY, LedgerEntryPostedData, LedgerId, ledgerIdFromStream, ledgerStreamName, MERCHANT_ACCOUNTS } from '#ledger';
import type { Projection } from '#event-store/projections';
import { copyRowsInto, copyRowsUnlessTaken, CopyColumn } from '#platform/database';

/**
 * From how many entries (or opened holds) a batch writes its entries and postings (its opened holds) by COPY (a rebuild's
 * pages; a live projector's batches are mostly smaller and keep the INSERTs).
 */
export const LEDGER_COPY_MIN_ENTRIES = 256;

/** The columns of ledger_entries a batch writes, with their types (for COPY). */
const ENTRY_COPY_COLUMNS: readonly CopyColumn[] = [
  { name: 'entry_id', type: 'uuid' },
  { name: 'account_id', type: 'text' },
  { name: 'mode', type: 'text' },
  { name: 'seq', type: 'bigint' },
  { name: 'kind', type: 'text' },
  { name: 'cause', type: 'text' },
  { name: 'occurred_at', type: 'timestamptz' },
  { name: 'log_position', type: 'text' },
  { name: 'available_at', type: 'timestamptz' },
];
const ENTRY_COLUMNS = ENTRY_COPY_COLUMNS.map((c) => c.name);
/** The columns of ledger_open_holds a batch writes (by COPY, or by the INSERT below a COPY's size). */
const HOLD_COPY_COLUMNS: readonly CopyColumn[] = [
  { name: 'account_id', type: 'text' },
  { name: 'mode', type: 'text' },
  { name: 'invoice_id', type: 'text' },
  { name: 'amount', type: 'bigint' },
  { name: 'release_at', type: 'timestamptz' },
];
/** The columns of ledger_postings a batch writes (by COPY, or by the INSERT below a COPY's size). */
const POSTING_COPY_COLUMNS: readonly CopyColumn[] = [
  { name: 'entry_id', type: 'uuid' },
  { name: 'ordinal', type: 'smallint' },
  { name: 'account', type: 'text' },
  { name: 'amount', type: 'bigint' },
  { name: 'balance_after', type: 'bigint' },
];

/**
 * The ledger's read model.
 *
 * - No foreign key from a posting to its entry: it checked every posting against the
 *   entries' index, two thirds of the time of a rebuild's posting inserts. The ledger
 *   projection alone writes both tables, each entry with its postings in one batch, and
 *   empties them together; nothing deletes an entry (decision 0095).
 * - Balance transactions (GET /v1/balance/transactions) come from the journal: each
 *   posting to a merchant account carries that account's balance after it, and a
 *   payment entry the time its hold ends (`available_at`, the hold's scheduled end).
 *   Pages of one type are served by the kind index, the newest-first pages by the
 *   (account_id, mode, seq) key; the cause index answers PostgresLedgerCauseIndex.
 */
export const ledgerReadModelMigration: Migration = {
  id: 'payments:0002_read_model_ledger',
  sql: `
CREATE TABLE ledger_entries (
  entry_id uuid PRIMARY KEY,
  account_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('test', 'live')),
  seq bigint NOT NULL,
  kind text NOT NULL,
  cause text NOT NULL,
  occurred_at timestamptz NOT NULL,
  log_position text NOT NULL,
  available_at timestamptz,
  UNIQUE (account_id, mode, seq)
);
CREATE INDEX ledger_entries_cause ON ledger_entries (account_id, mode, cause);
CREATE INDEX ledger_entries_kind ON ledger_entries (account_id, mode, kind, seq);
CREATE TABLE ledger_postings (
  entry_id uuid NOT NULL,
  ordinal smallint NOT NULL,
  account text NOT NULL,
  amount bigint NOT NULL,
  balance_after bigint,
  PRIMARY KEY (entry_id, ordinal)
);
CREATE TABLE ledger_balances (
  account_id text NOT NULL,
  mode text NOT NULL,
  account text NOT NULL,
  balance bigint NOT NULL,
  PRIMARY KEY (account_id, mode, account)
);
CREATE TABLE ledger_open_holds (
  account_id text NOT NULL,
  mode text NOT NULL,
  invoice_id text NOT NULL,
  amount bigint NOT NULL,
  release_at timestamptz NOT NULL,
  PRIMARY KEY (account_id, mode, invoice_id)
);
CREATE INDEX ledger_open_holds_due ON ledger_open_holds (release_at);
CREATE TRIGGER ledger_postings_reset_counted AFTER TRUNCATE ON ledger_postings FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('ledger');
CREATE TRIGGER ledger_entries_reset_counted AFTER TRUNCATE ON ledger_entries FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('ledger');
CREATE TRIGGER ledger_balances_reset_counted AFTER TRUNCATE ON ledger_balances FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('ledger');
CREATE TRIGGER ledger_open_holds_reset_counted AFTER TRUNCATE ON ledger_open_holds FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('ledger');
`,
};

/**
 * A ledger's entries by the time they occurred, for a statement over (from, to]: its
 * opening reads the entries after `from` and its pages the seq span of the period's
 * entries, where the (account_id, mode, seq) key read every entry of the ledger for
 * both. An entry's seq is in the index, so the span is read from it alone. Built
 * concurrently: the table may be large when a gateway upgrades.
 */
export const ledgerEntriesByTimeMigration: Migration = {
  id: 'payments:0016_ledger_entries_by_time',
  concurrentIndex: 'ledger_entries_time',
  sql: 'CREATE INDEX CONCURRENTLY IF NOT EXISTS ledger_entries_time ON ledger_entries (account_id, mode, occurred_at) INCLUDE (seq)',
};

/**
 * Journal entries with their postings, and the balance of every account, for the
 * audit API and GET /balance. Idempotent: an entry already stored is skipped, and
 * balances move only for entries stored by this batch.
 */
export const ledgerProjection: Projection = {
  name: 'ledger',
  tables: ['ledger_postings', 'ledger_entries', 'ledger_balances', 'ledger_open_holds'],
  // Postings are only inserted, for the entries this batch inserted: nothing upserts or looks them up by their key.
  primaryKeyBuiltAfterRebuild: ['ledger_postings'],
  filter: { streamNamePrefixes: [`${LEDGER_CATEGORY}-`], eventTypePrefixes: ['LedgerEntryPosted'] },
  async apply(tx: PoolClient, events: readonly RecordedEvent[]): Promise<void> {
    // An entry id twice in one batch (only a corrupted log has that) is applied once,
    // as it would be in two batches: the first occurrence counts. A batch holds the
    // entries of a few ledgers: each stream's name is parsed once.
    const seen = new Set<string>();
    const ledgers = new Map<string, LedgerId | null>();
    const entries: EntryOfBatch[] = [];
    for (const event of events) {
      let ledger = ledgers.get(event.streamName);
      if (ledger === undefined) ledgers.set(event.streamName, (ledger = ledgerIdFromStream(event.streamName)));
      const data = event.data as unknown as LedgerEntryPostedData;
      if (!ledger || seen.has(data.entryId)) continue;
      seen.add(data.entryId);
      entries.push({ event, ledger, data });
    }
    if (entries.length === 0) return;

    const postings = (await copyFreshEntries(tx, entries)) ?? (await insertEntriesUnlessStored(tx, entries));
    if (postings.length === 0) return;

    // Open holds, for the worker that releases them when due: the batch's net effect
    // on each hold in two statements (see openHoldChanges).
    const holds = openHoldChanges(postings);
    if (holds.released.length > 0) {
      await tx.query(
        `DELETE FROM ledger_open_holds h USING unnest($1::text[], $2::text[], $3::text[]) AS r(account_id, mode, invoice_id)
         WHERE h.account_id = r.account_id AND h.mode = r.mode AND h.invoice_id = r.invoice_id`,
        [holds.released.map((h) => h.accountId), holds.released.map((h) => h.mode), holds.released.map((h) => h.invoiceId)],
      );
    }
    // Many opened holds (a rebuild's pages) go by COPY: one is stored already only when a
    // hold still open is opened again, and then the COPY is undone and the INSERT below skips it.
    const copied =
      holds.opened.length >= LEDGER_COPY_MIN_ENTRIES &&
      (await copyRowsUnlessTaken(
        tx,
        'ledger_open_holds',
        HOLD_COPY_COLUMNS,
        holds.opened.map((h) => [h.accountId, h.mode, h.invoiceId, h.amount, h.releaseAt]),
      ));
    if (holds.opened.length > 0 && !copied) {
      await tx.query(
        `INSERT INTO ledger_open_holds (${HOLD_COPY_COLUMNS.map((c) => c.name).join(', ')})
         SELECT * FROM unnest(${HOLD_COPY_COLUMNS.map((c, i) => `$${i + 1}::${c.type}[]`).join(', ')})
         ON CONFLICT DO NOTHING`,
        [
          holds.opened.map((h) => h.accountId),
          holds.opened.map((h) => h.mode),
          holds.opened.map((h) => h.invoiceId),
          holds.opened.map((h) => h.amount),
          holds.opened.map((h) => h.releaseAt),
        ],
      );
    }

    // Postings only ever go in with their entry, inserted by this batch: none can exist yet.
    // A merchant account's posting carries that account's balance after it (balance transactions).
    const running = await merchantBalancesBefore(tx, postings);
    const rows: [string, number, string, number, number | null][] = [];
    for (const { ledger, data } of postings) {
      data.postings.forEach((p, i) => {
        const key = `${ledger.accountId}\u0000${ledger.mode}\u0000${p.account}`;
        const after = (MERCHANT_ACCOUNTS as readonly string[]).includes(p.account) ? (running.get(key) ?? 0) + p.amount : null;
        if (after !== null) running.set(key, after);
        rows.push([data.entryId, i, p.account, p.amount, after]);
      });
    }
    if (postings.length >= LEDGER_COPY_MIN_ENTRIES) await copyRowsInto(tx, 'ledger_postings', POSTING_COPY_COLUMNS, rows);
    else {
      await tx.query(
        `INSERT INTO ledger_postings (${POSTING_COPY_COLUMNS.map((c) => c.name).join(', ')})
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS p(${POSTING_COPY_COLUMNS.map((c) => `${c.name} ${c.type}`).join(', ')})`,
        [JSON.stringify(rows.map((r) => Object.fromEntries(POSTING_COPY_COLUMNS.map((c, i) => [c.name, r[i]]))))],
      );
    }

    // Each account's change, in the order the accounts first appear (by ledger, then account: no key built per posting).
    const deltas: { accountId: string; mode: string; account: string; amount: number }[] = [];
    const byLedger = new Map<LedgerId, Map<string, { accountId: string; mode: string; account: string; amount: number }>>();
    for (const { ledger, data } of postings) {
      let accounts = byLedger.get(ledger);
      if (!accounts) byLedger.set(ledger, (accounts = new Map()));
      for (const p of data.postings) {
        const d = accounts.get(p.account);
        if (d) d.amount += p.amount;
        else {
          const added = { accountId: ledger.accountId, mode: ledger.mode, account: p.account, amount: p.amount };
          accounts.set(p.account, added);
          deltas.push(added);
        }
      }
    }
    const d = deltas;
    await tx.query(
      `INSERT INTO ledger_balances AS b (account_id, mode, account, balance)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
       ON CONFLICT (account_id, mode, account) DO UPDATE SET balance = b.balance + EXCLUDED.balance`,
      [d.map((x) => x.accountId), d.map((x) => x.mode), d.map((x) => x.account), d.map((x) => x.amount)],
    );
  },
};

/** The ledger read model, as the readers that read its rebuild state name it (rebuildStateSql). */
export const LEDGER_MODEL: readonly string[] = [ledgerProjection.name];

interface EntryOfBatch {
  readonly event: RecordedEvent;
  readonly ledger: LedgerId;
  readonly data: LedgerEntryPostedData;
}

const entryRow = (e: EntryOfBatch) => ({
  entry_id: e.data.entryId,
  account_id: e.ledger.accountId,
  mode: e.ledger.mode,
  seq: e.event.revision.toString(),
  kind: e.data.kind,
  cause: e.data.cause,
  occurred_at: e.data.occurredAt,
  log_position: `${e.event.position.commit}/${e.event.position.prepare}`,
  available_at: e.data.hold?.releaseAt ?? null,
});

/** The stored balances of the merchant accounts of the batch's ledgers, by `accountId NUL mode NUL account`. */
async function merchantBalancesBefore(tx: PoolClient, entries: readonly EntryOfBatch[]): Promise<Map<string, number>> {
  const ledgers = [...new Map(entries.map((e) => [`${e.ledger.accountId}\u0000${e.ledger.mode}`, e.ledger])).values()];
  const rows = await tx.query<{ account_id: string; mode: string; account: string; balance: string }>(
    `SELECT b.account_id, b.mode, b.account, b.balance FROM ledger_balances b JOIN unnest($1::text[], $2::text[]) AS l(account_id, mode)
       ON b.account_id = l.account_id AND b.mode = l.mode
     WHERE b.account = ANY($3::text[])`,
    [ledgers.map((l) => l.accountId), ledgers.map((l) => l.mode), MERCHANT_ACCOUNTS],
  );
  return new Map(rows.rows.map((r) => [`${r.account_id}\u0000${r.mode}\u0000${r.account}`, Number(r.balance)]));
}

/** The batch's entries not stored yet, inserted; returns them (the ones whose postings and balances this batch writes). */
async function insertEntriesUnlessStored(tx: PoolClient, entries: readonly EntryOfBatch[]): Promise<EntryOfBatch[]> {
  // Rows go as one JSON parameter (jsonb_to_recordset): see foldBatchIntoTable.
  const inserted = await tx.query<{ entry_id: string }>(
    `INSERT INTO ledger_entries (${ENTRY_COLUMNS.join(', ')})
     SELECT * FROM jsonb_to_recordset($1::jsonb)
       AS e(${ENTRY_COPY_COLUMNS.map((c) => `${c.name} ${c.type}`).join(', ')})
     ON CONFLICT (entry_id) DO NOTHING RETURNING entry_id`,
    [JSON.stringify(entries.map(entryRow))],
  );
  const fresh = new Set(inserted.rows.map((r) => r.entry_id));
  return entries.filter((e) => fresh.has(e.data.entryId));
}

/**
 * A large batch's entries by COPY, when none of them is stored yet (always, but for a
 * log that repeats an entry id in a later batch): inside a savepoint, so that a taken
 * entry id (23505) undoes the COPY alone and returns null, and the batch goes on with
 * insertEntriesUnlessStored as a small one does. Returns every entry otherwise.
 */
async function copyFreshEntries(tx: PoolClient, entries: readonly EntryOfBatch[]): Promise<EntryOfBatch[] | null> {
  if (entries.length < LEDGER_COPY_MIN_ENTRIES) return null;
  const copied = await copyRowsUnlessTaken(
    tx,
    'ledger_entries',
    ENTRY_COPY_COLUMNS,
    entries.map((e) => [
      e.data.entryId,
      e.ledger.accountId,
      e.ledger.mode,
      e.event.revision,
      e.data.kind,
      e.data.cause,
      e.data.occurredAt,
      `${e.event.position.commit}/${e.event.position.prepare}`,
      e.data.hold?.releaseAt ?? null,
    ]),
  );
  return copied ? [...entries] : null;
}

interface HoldKey {
  readonly accountId: string;
  readonly mode: string;
  readonly invoiceId: string;
}
interface OpenHoldRow extends HoldKey {
  readonly amount: number;
  readonly releaseAt: string;
}

/**
 * What a batch of new entries does to `ledger_open_holds`, as two sets: the holds to
 * delete, then the holds to insert unless present. Entry by entry, a payment with a
 * release time inserts its hold unless present and a release deletes it; folded per
 * hold in log order, that is: a release anywhere in the batch deletes the stored hold,
 * and the first payment after the batch's last release (or, without a release, the
 * first payment) inserts unless present. So the batch ends with the table that
 * applying its entries one at a time would leave, in two statements whatever its size.
 */
export function openHoldChanges(
  entries: readonly { readonly ledger: { readonly accountId: string; readonly mode: string }; readonly data: LedgerEntryPostedData }[],
): { readonly released: readonly HoldKey[]; readonly opened: readonly OpenHoldRow[] } {
  const byHold = new Map<string, { released: HoldKey | null; opened: OpenHoldRow | null }>();
  const at = (accountId: string, mode: string, invoiceId: string) => {
    const key = `${accountId}\u0000${mode}\u0000${invoiceId}`;
    let change = byHold.get(key);
    if (!change) byHold.set(key, (change = { released: null, opened: null }));
    return change;
  };
  for (const { ledger, data } of entries) {
    if (data.kind === 'payment_recorded' && data.hold && data.hold.releaseAt !== null) {
      const change = at(ledger.accountId, ledger.mode, data.hold.invoiceId);
      change.opened ??= {
        accountId: ledger.accountId,
        mode: ledger.mode,
        invoiceId: data.hold.invoiceId,
        amount: data.hold.amount,
        releaseAt: data.hold.releaseAt,
      };
    } else if (data.kind === 'hold_released' && data.invoiceId !== undefined) {
      const change = at(ledger.accountId, ledger.mode, data.invoiceId);
      change.released = { accountId: ledger.accountId, mode: ledger.mode, invoiceId: data.invoiceId };
      change.opened = null;
    }
  }
  const changes = [...byHold.values()];
  return {
    released: changes.flatMap((c) => (c.released ? [c.released] : [])),
    opened: changes.flatMap((c) => (c.opened ? [c.opened] : [])),
  };
}

/** Entries past the read model that merchantBalance adds up itself; beyond, it answers null. */
export const BALANCE_TAIL_MAX = 500;

/**
 * The merchant's three balances in a mode (kopecks), current: ledger_balances (0 for an
 * account never posted to) plus the ledger's entries past the last one the read model
 * applied, read from its stream in the same breath. A refund's or payout's reservation,
 * posted before its 202 or 201, shows at once, though the projection is milliseconds behind.
 */
export async function merchantBalance(
  pool: Pick<Pool, 'query'>,
  store: Pick<EventStore, 'readStream'>,
  ledger: LedgerId,
): Promise<{ readonly available: number; readonly pending: number; readonly reserved: number } | null> {
  // One statement, one snapshot: the balances and the last entry they count (the projection writes both in one transaction).
  const row = (
    await pool.query<{ applied: string | null; balances: Record<string, string> | null }>(
      `SELECT (SELECT max(seq) FROM ledger_entries WHERE account_id = $1 AND mode = $2)::text AS applied,
              (SELECT json_object_agg(account, balance::text) FROM ledger_balances
                WHERE account_id = $1 AND mode = $2 AND account IN ('available', 'pending', 'reserved')) AS balances`,
      [ledger.accountId, ledger.mode],
    )
  ).rows[0]!;
  const balance = { available: 0, pending: 0, reserved: 0 };
  for (const account of ['available', 'pending', 'reserved'] as const) balance[account] = Number(row.balances?.[account] ?? 0);
  const later = await store
    .readStream(ledgerStreamName(ledger), { fromRevision: row.applied === null ? 0n : BigInt(row.applied) + 1n, maxCount: BALANCE_TAIL_MAX })
    .catch((error: unknown) => (error instanceof StreamNotFoundError ? [] : Promise.reject(error)));
  // The read model far behind (stuck, or rebuilt): the caller folds the ledger from its snapshot instead.
  if (later.length === BALANCE_TAIL_MAX) return null;
  for (const event of later) {
    for (const p of (event.data as unknown as LedgerEntryPostedData).postings) if (p.account in balance) balance[p.account as keyof typeof balance] += p.amount;
  }
  return balance;
}

/** One journal entry of the read model, with its postings in order (amounts in kopecks). */
export interface LedgerEntryRow {
  readonly entryId: string;
  readonly seq: number;
  readonly kind: string;
  readonly cause: string;
  readonly occurredAt: Date;
  readonly logPosition: string;
  readonly postings: readonly { readonly account: string; readonly amount: number }[];
}

/** A ledger entry as the journal queries select it: its columns and its postings as JSON. */
export interface LedgerEntryDbRow {
  entry_id: string;
  seq: string;
  kind: string;
  cause: string;
  occurred_at: Date;
  log_position: string;
  postings: { account: string; amount: number }[];
}

export const toLedgerEntryRow = (r: LedgerEntryDbRow): LedgerEntryRow => ({
  entryId: r.entry_id,
  seq: Number(r.seq),
  kind: r.kind,
  cause: r.cause,
  occurredAt: r.occurred_at,
  logPosition: r.log_position,
  postings: r.postings.map((p) => ({ account: p.account, amount: Number(p.amount) })),
});

/** The postings of the ledger entry `e`, in order, as JSON (what LedgerEntryDbRow.postings holds). */
export const ENTRY_POSTINGS = `COALESCE((SELECT json_agg(json_build_object('account', p.account, 'amount', p.amount) ORDER BY p.ordinal)
            FROM ledger_postings p WHERE p.entry_id = e.entry_id), '[]')`;

/** A page of a ledger's journal, oldest first: the entries after `afterSeq`, at most `limit`. */
export async function ledgerEntriesPage(
  pool: Pick<Pool, 'query'>,
  ledger: { accountId: string; mode: 'test' | 'live' },
  afterSeq: number,
  limit: number,
): Promise<{ readonly items: readonly LedgerEntryRow[]; readonly hasMore: boolean }> {
  // The page's entries first, then the postings of those entries only: grouped before the
  // LIMIT, the first page joined and aggregated the whole ledger.
  const rows = await pool.query<LedgerEntryDbRow>(
    `SELECT e.entry_id, e.seq, e.kind, e.cause, e.occurred_at, e.log_position, ${ENTRY_POSTINGS} AS postings
     FROM ledger_entries e
     WHERE e.account_id = $1 AND e.mode = $2 AND e.seq > $3
     ORDER BY e.seq LIMIT $4`,
    [ledger.accountId, ledger.mode, afterSeq, limit + 1],
  );
  return {
    items: rows.rows.slice(0, limit).map(toLedgerEntryRow),
    hasMore: rows.rows.length > limit,
  };
}
