import type { Pool, PoolClient } from 'pg';
import { inTransaction } from '#platform/database';
import type { AllFilter, EventStore, Position, RecordedEvent } from '#event-store';
import { comparePositions, matchesFilter } from '#event-store';
import { readCheckpointStates } from '#event-store/projections';
import { lockReadModelTables, quoteIdentifier } from '../read-models/table-locks';
import type { RowFold } from '../read-models/folded-row';
import { invoicesProjection, invoicesTable } from '../invoices/invoices.read-model';
import { refundsFold, refundsProjection } from '../refunds/refunds.read-model';
import { payoutsProjection, payoutsTable } from '../payouts/payouts.read-model';

/**
 * A read model of flows that finance's reconciliation reads (one row per invoice,
 * refund or payout), as this check folds it again from the log: the projection's own
 * fold, its filter, and where a row's id is (the table's, and an event's in its data).
 */
interface FlowTable {
  /** The projection, its checkpoint and its table. */
  readonly name: 'invoices' | 'refunds' | 'payouts';
  readonly filter: AllFilter;
  readonly fold: RowFold<object | null>;
  /** An event's flow id as text, from its data (PostgreSQL: the same text as the table's `id::text`). */
  readonly flowIdSql: string;
  /** The table keeps `item`, the row as JSON text (compared as text), and `last_revision`, its stream's revision folded. */
  readonly folded: boolean;
}

const FLOW_TABLES: readonly FlowTable[] = [
  { name: 'invoices', filter: invoicesProjection.filter, fold: invoicesTable as RowFold<object | null>, flowIdSql: `data->>'invoiceId'`, folded: true },
  { name: 'refunds', filter: refundsProjection.filter!, fold: refundsFold as RowFold<object | null>, flowIdSql: `data->>'refundId'`, folded: false },
  { name: 'payouts', filter: payoutsProjection.filter!, fold: payoutsTable as RowFold<object | null>, flowIdSql: `data->>'payoutId'`, folded: true },
];

/** Table rows and log events per page of a cursor. */
const PAGE = 2_000;

export interface FlowProblem {
  readonly table: FlowTable['name'];
  readonly id: string;
  readonly kind: 'flow_differs' | 'missing_in_read_model' | 'unknown_in_read_model';
  readonly detail: string;
}

export interface FlowReport {
  /** Rows compared, per table. */
  readonly rows: Readonly<Record<FlowTable['name'], number>>;
  readonly problems: readonly FlowProblem[];
  /** Read models marked as being rebuilt (a rebuild stopped half-way): not compared, so not verified. */
  readonly notCompared: readonly FlowTable['name'][];
}

/** A flow as the log folds it: its id (as the table's `id::text`), its row (null if its events make none) and its last event's revision. */
interface FoldedFlow {
  readonly id: string;
  readonly row: object | null;
  readonly revision: bigint;
}

/**
 * Compares the `invoices`, `refunds` and `payouts` read models, which reconciliation
 * reads as the flows' side, with the same projections folded again from the log: every
 * row's columns (and `item`, what lists show, and `last_revision`) as of each projection's
 * checkpoint, both ways (a row the log does not make, a flow the table lacks). Read in one
 * REPEATABLE READ snapshot, its tables locked first (lockReadModelTables), so a rebuild waits.
 *
 * `logHere` (the log is this database's `events`, PostgreSQL): each table's events are
 * read sorted by flow id beside its rows in the same order, one flow folded at a time,
 * so memory does not grow with the log. Otherwise (EventStoreDB) the log is read once in
 * log order and every flow's row is held until the tables are compared; the snapshot's
 * session, idle meanwhile, is exempt from the idle-in-transaction bound for it.
 */
export async function verifyFlowReadModels(pool: Pool, store: EventStore, options: { logHere: boolean }): Promise<FlowReport> {
  return inTransaction(
    pool,
    async (client) => {
      await lockReadModelTables(
        client,
        FLOW_TABLES.map((t) => t.name),
      );
      const checkpoints = await readCheckpointStates(
        client,
        FLOW_TABLES.map((t) => t.name),
      );
      const problems: FlowProblem[] = [];
      const notCompared: FlowTable['name'][] = [];
      const rows = { invoices: 0, refunds: 0, payouts: 0 };
      const compared: { table: FlowTable; upTo: Position }[] = [];
      for (const table of FLOW_TABLES) {
        const state = checkpoints.get(table.name);
        if (state?.rebuilding) notCompared.push(table.name);
        else compared.push({ table, upTo: state?.position ?? { commit: 0n, prepare: 0n } });
      }
      if (!options.logHere) await client.query('SET LOCAL idle_in_transaction_session_timeout = 0');
      const held = options.logHere ? null : await foldInLogOrder(store, compared);
      for (const { table, upTo } of compared) {
        const flows = held ? held.get(table.name)! : flowsSortedInDatabase(client, table, upTo);
        rows[table.name] = await compareWithTable(client, table, flows, problems);
      }
      return { rows, problems, notCompared };
    },
    { isolation: 'REPEATABLE READ', readOnly: true },
  );
}

/** The table's flows folded from this database's log up to `upTo`, in the order of their ids' text (bytes, `COLLATE "C"`). */
async function* flowsSortedInDatabase(client: PoolClient, table: FlowTable, upTo: Position): AsyncGenerator<FoldedFlow> {
  const prefixes = (list: readonly string[] | undefined, column: string) =>
    list ? `(${list.map((p) => `starts_with(${column}, ${literal(p)})`).join(' OR ')})` : 'true';
  const cursor = `flow_events_${table.name}`;
  await client.query(
    `DECLARE ${cursor} NO SCROLL CURSOR FOR
     SELECT ${table.flowIdSql} AS flow_id, stream_name, stream_revision::text AS revision, event_type, data::text AS data FROM events
     WHERE (transaction_id, global_position) <= ($1::text::xid8, $2::bigint)
       AND ${prefixes(table.filter.streamNamePrefixes, 'stream_name')} AND ${prefixes(table.filter.eventTypePrefixes, 'event_type')}
     ORDER BY ${table.flowIdSql} COLLATE "C", transaction_id, global_position`,
    [upTo.commit.toString(), upTo.prepare.toString()],
  );
  let id: string | null = null;
  let row: object | null = null;
  let revision = -1n;
  for (;;) {
    const page = (
      await client.query<{ flow_id: string | null; stream_name: string; revision: string; event_type: string; data: string }>(`FETCH ${PAGE} FROM ${cursor}`)
    ).rows;
    for (const r of page) {
      const event = { type: r.event_type, streamName: r.stream_name, revision: BigInt(r.revision), data: JSON.parse(r.data) } as RecordedEvent;
      if ((table.fold.idOf(event) ?? null) === null || r.flow_id === null) continue;
      if (r.flow_id !== id) {
        if (id !== null) yield { id, row, revision };
        id = r.flow_id;
        row = table.fold.initial();
      }
      row = table.fold.evolve(row, event);
      revision = event.revision;
    }
    if (page.length < PAGE) break;
  }
  await client.query(`CLOSE ${cursor}`);
  if (id !== null) yield { id, row, revision };
}

/** Every table's flows folded from one read of the log in log order (any store), each table's sorted by id. */
async function foldInLogOrder(store: EventStore, tables: readonly { table: FlowTable; upTo: Position }[]): Promise<Map<string, FoldedFlow[]>> {
  const rows = new Map(tables.map(({ table }) => [table.name, new Map<string, { row: object | null; revision: bigint }>()]));
  const last = tables.reduce<Position | null>((max, t) => (max === null || comparePositions(t.upTo, max) > 0 ? t.upTo : max), null);
  if (last !== null && (last.commit > 0n || last.prepare > 0n)) {
    const subscription = store.subscribeToAll({
      filter: { streamNamePrefixes: tables.flatMap(({ table }) => table.filter.streamNamePrefixes ?? []) },
      maxBatchSize: PAGE,
    });
    try {
      read: for await (const batch of subscription) {
        for (const event of batch.events) {
          if (comparePositions(event.position, last) > 0) break read;
          for (const { table, upTo } of tables) {
            if (comparePositions(event.position, upTo) > 0 || !matchesFilter(table.filter, event)) continue;
            const id = table.fold.idOf(event) ?? null;
            if (id === null) continue;
            const flows = rows.get(table.name)!;
            const key = String(id);
            const before = flows.get(key);
            flows.set(key, { row: table.fold.evolve(before ? before.row : table.fold.initial(), event), revision: event.revision });
          }
        }
        if (batch.caughtUp || comparePositions(batch.checkpoint, last) >= 0) break;
      }
    } finally {
      await subscription.unsubscribe();
    }
  }
  return new Map([...rows].map(([name, flows]) => [name, [...flows.keys()].sort(byBytes).map((id) => ({ id, ...flows.get(id)! }))]));
}

/** Ids compared as `COLLATE "C"` orders them (the ids are ASCII: UTF-16 units order as bytes). */
const byBytes = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Walks the table's rows by id beside the flows folded from the log (both by id, as
 * bytes), reporting a row that differs, a row the log does not make and a flow without
 * its row. Returns the rows read.
 */
async function compareWithTable(
  client: PoolClient,
  table: FlowTable,
  flows: AsyncIterable<FoldedFlow> | Iterable<FoldedFlow>,
  problems: FlowProblem[],
): Promise<number> {
  const columns = table.fold.columns;
  const cursor = `flow_rows_${table.name}`;
  await client.query(
    `DECLARE ${cursor} NO SCROLL CURSOR FOR
     SELECT id::text AS id, ${columns.map((c, i) => `${asText(quoteIdentifier(c.name), c.type)} AS c${i}`).join(', ')}${table.folded ? ', item::text AS item, last_revision::text AS last_revision' : ''}
     FROM ${quoteIdentifier(table.name)} ORDER BY id::text COLLATE "C"`,
  );
  let read = 0;
  let page: Record<string, string | null>[] = [];
  let at = 0;
  let more = true;
  const nextRow = async (): Promise<Record<string, string | null> | null> => {
    if (at === page.length && more) {
      page = (await client.query<Record<string, string | null>>(`FETCH ${PAGE} FROM ${cursor}`)).rows;
      more = page.length === PAGE;
      at = 0;
    }
    return at < page.length ? page[at++]! : null;
  };
  const report = (id: string, kind: FlowProblem['kind'], detail: string) => problems.push({ table: table.name, id, kind, detail });
  let stored = await nextRow();
  const unknownUpTo = async (id: string | null) => {
    while (stored !== null && (id === null || byBytes(stored.id!, id) < 0)) {
      read++;
      report(stored.id!, 'unknown_in_read_model', 'the read model has a row the log does not make');
      stored = await nextRow();
    }
  };
  for await (const flow of flows) {
    await unknownUpTo(flow.id);
    const here = stored !== null && stored.id === flow.id ? stored : null;
    if (here) {
      read++;
      stored = await nextRow();
    }
    if (flow.row === null) {
      if (here) report(flow.id, 'unknown_in_read_model', 'the read model has a row its events do not make');
      continue;
    }
    if (!here) {
      report(flow.id, 'missing_in_read_model', 'the log makes this row; the read model has none');
      continue;
    }
    const differing = columns.flatMap((c, i) => {
      const expected = c.value(flow.row) ?? null;
      const actual = here[`c${i}`] ?? null;
      return agrees(expected, actual, c.type) ? [] : [`${c.name}: log says ${String(expected)}, read model says ${actual ?? 'null'}`];
    });
    if (table.folded && here.item !== JSON.stringify(flow.row)) differing.push('item: differs from the row folded from the log');
    if (table.folded && here.last_revision !== flow.revision.toString()) {
      differing.push(`last_revision: log says ${flow.revision}, read model says ${here.last_revision ?? 'null'}`);
    }
    if (differing.length > 0) report(flow.id, 'flow_differs', differing.join('; '));
  }
  await unknownUpTo(null);
  await client.query(`CLOSE ${cursor}`);
  return read;
}

/** A column as text: an instant in UTC as JavaScript's toISOString writes it (with microseconds when it has them). */
const asText = (column: string, type: string): string =>
  type === 'timestamptz'
    ? `to_char(${column} AT TIME ZONE 'UTC', CASE WHEN date_trunc('milliseconds', ${column}) = ${column} THEN 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"' ELSE 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"' END)`
    : `${column}::text`;

/** Whether a value the log's fold gives is the column's text: equal as text, else the same instant, or uuid in another case. */
function agrees(expected: unknown, actual: string | null, type: string): boolean {
  if (expected === null || actual === null) return expected === actual;
  const text = String(expected);
  if (text === actual) return true;
  if (type === 'uuid') return text.toLowerCase() === actual;
  if (type !== 'timestamptz') return false;
  const ms = Date.parse(text);
  return !Number.isNaN(ms) && new Date(ms).toISOString() === actual;
}

const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;
