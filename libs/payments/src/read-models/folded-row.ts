import type { PoolClient } from 'pg';
import type { RecordedEvent } from '#event-store';
import { copyRowsInto, CopyType, CopyValue } from '#platform/database';

/**
 * From how many new rows a batch writes them by COPY rather than by the upsert: below it
 * the one statement more is not worth it (a live projector's batches are mostly smaller).
 */
export const FOLD_COPY_MIN_ROWS = 256;

/** A column of a read-model table besides id, item and last_revision, derived from the row for queries. */
export interface FoldedColumn<S> {
  readonly name: string;
  /** The SQL type of the column, as the batch's rows are read (jsonb_to_recordset) and copied (COPY's binary format). */
  readonly type: CopyType;
  value(row: S): unknown;
}

/**
 * A read-model table as a fold of the log, one row per flow: the row before the flow's
 * first event, how each event moves it, and its columns. ledger:verify folds the log
 * again with it to check the table (verifyFlowReadModels).
 */
export interface RowFold<S> {
  /** The id of the row an event belongs to (from its data), or null for an event that moves no row. */
  idOf(event: RecordedEvent): string | number | null;
  initial(): S;
  evolve(row: S, event: RecordedEvent): S;
  readonly columns: readonly FoldedColumn<S>[];
}

/**
 * A table that keeps one row per stream in the read model's own shape (`item` json: the
 * text JSON.stringify wrote, decision 0095) with the stream revision it has reached
 * (`last_revision`), plus columns derived from the row for queries.
 */
export interface FoldedTable<S> extends RowFold<S> {
  readonly table: 'invoices' | 'payouts';
  readonly idType: 'uuid' | 'bigint';
  /** The id of the row an event belongs to (from its data). */
  idOf(event: RecordedEvent): string | number;
}

/**
 * Applies a batch to a read-model table in three statements, whatever its size:
 * the rows the batch touches are read (and locked) at once, each stream's events are
 * folded in memory, and every changed row is written by one upsert. Idempotent: an
 * event at or below a row's `last_revision` is skipped, so a replayed batch changes
 * nothing. New rows are inserted in the order their streams first appear in the log,
 * so an identity column (`seq`) keeps the order of arrival.
 */
export async function foldBatchIntoTable<S>(tx: PoolClient, t: FoldedTable<S>, events: readonly RecordedEvent[]): Promise<void> {
  const byId = new Map<string, { id: string | number; events: RecordedEvent[] }>();
  for (const e of events) {
    const id = t.idOf(e);
    const key = String(id);
    const entry = byId.get(key) ?? { id, events: [] };
    entry.events.push(e);
    byId.set(key, entry);
  }
  if (byId.size === 0) return;
  const stored = await tx.query<{ id: string; item: S; last_revision: string }>(
    `SELECT id::text AS id, item, last_revision FROM ${t.table} WHERE id = ANY($1::${t.idType}[]) ORDER BY id FOR UPDATE`,
    [[...byId.values()].map((e) => e.id)],
  );
  const storedRows = new Map(stored.rows.map((r) => [r.id, r]));

  const changed: { id: string | number; item: S; revision: bigint; stored: boolean }[] = [];
  for (const [key, { id, events: streamEvents }] of byId) {
    const row = storedRows.get(key);
    // A stream is folded from its first event or from its stored row, never from the middle.
    if (!row && streamEvents[0]!.revision !== 0n) continue;
    let item = row ? row.item : t.initial();
    let revision = row ? BigInt(row.last_revision) : -1n;
    const start = revision;
    for (const e of streamEvents) {
      if (e.revision <= revision) continue;
      item = t.evolve(item, e);
      revision = e.revision;
    }
    if (revision > start) changed.push({ id, item, revision, stored: row !== undefined });
  }
  if (changed.length === 0) return;

  const names = ['id', ...t.columns.map((c) => c.name), 'item', 'last_revision'];
  // `item` goes as its JSON text, by COPY and by the upsert alike, so both store the same bytes.
  const types = [t.idType, ...t.columns.map((c) => c.type), 'text', 'bigint'];
  // Rows the batch's read found absent (and locked nothing for) cannot exist: this
  // projection's batches are applied by one writer at a time, each after the last one
  // committed. Many of them (a rebuild's pages) go by COPY, in the order their streams
  // first appear, after the upsert of the stored rows; an identity column numbers them
  // in that order as the upsert would have.
  const fresh = changed.filter((c) => !c.stored);
  const upserted = fresh.length >= FOLD_COPY_MIN_ROWS ? changed.filter((c) => c.stored) : changed;
  if (upserted.length > 0) await upsertFoldedRows(tx, t, names, types, upserted);
  if (upserted !== changed) {
    await copyRowsInto(
      tx,
      t.table,
      names.map((name, i) => ({ name, type: (name === 'item' ? 'json' : types[i]) as CopyType })),
      fresh.map((c): CopyValue[] => [c.id, ...t.columns.map((col) => (col.value(c.item) ?? null) as CopyValue), c.item as object, c.revision]),
    );
  }
}

async function upsertFoldedRows<S>(
  tx: PoolClient,
  t: FoldedTable<S>,
  names: readonly string[],
  types: readonly string[],
  changed: readonly { id: string | number; item: S; revision: bigint }[],
): Promise<void> {
  // The rows as one JSON parameter (jsonb_to_recordset): JSON.stringify is native, and
  // PostgreSQL parses the document once and reads each value with its column type's input,
  // as it reads array elements (json_to_recordset re-parsed each row's `item`: 5 times slower).
  const rows = changed.map((c) => {
    const row: Record<string, unknown> = { id: c.id };
    for (const col of t.columns) row[col.name] = col.value(c.item);
    row.item = JSON.stringify(c.item);
    row.last_revision = c.revision.toString();
    return row;
  });
  const updates = names
    .slice(1)
    .map((n) => `${n} = EXCLUDED.${n}`)
    .join(', ');
  await tx.query(
    `INSERT INTO ${t.table} (${names.join(', ')})
     SELECT ${names.map((n) => (n === 'item' ? 'u.item::json' : `u.${n}`)).join(', ')}
     FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (${names.map((n, i) => `${n} ${types[i]}`).join(', ')})) WITH ORDINALITY AS u(${names.join(', ')}, ord)
     ORDER BY u.ord
     ON CONFLICT (id) DO UPDATE SET ${updates} WHERE ${t.table}.last_revision < EXCLUDED.last_revision`,
    [JSON.stringify(rows)],
  );
}
