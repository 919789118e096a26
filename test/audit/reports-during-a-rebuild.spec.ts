/**
 * A report, or an operator's snapshot of a read model, never answers from tables a
 * rebuild has emptied (docs/operations.md, "How a rebuild runs"). A rebuild marks its
 * read models and empties their tables with TRUNCATE, which is not MVCC-safe: a reader
 * that took its snapshot, or looked at the marks, before the TRUNCATE committed and
 * reads a table after it reads the table empty. So a statement reads the ledger's mark
 * in each of its queries, and reconciliation, `ledger:verify` and `read-models:checksum`
 * lock their tables before their snapshot is taken (the TRUNCATE then committed before
 * it, or waits for them), reconciliation also reading the marks in it. A refused report
 * is answered as a route marked @ReadsModels is during a rebuild: 503 with Retry-After.
 *
 * Each case runs a reader across what a rebuild's reset does in one transaction (mark,
 * TRUNCATE, checkpoint back to zero), committed once the reader waits for the tables.
 */
import { Client as PgClient } from 'pg';
import { PostgresEventStore } from '#event-store';
import { announceRebuild, ReadModelRebuildingError, resetForRebuild } from '#event-store/projections';
import { openAccountStatement, reconcilePeriod } from '#payments/audit';
import { ledgerProjection } from '#payments/ledger';
import { verifyLedgers } from '#payments/ledger-verification';
import { readModelsInOneSnapshot } from '#payments/read-models';
import { toApiError, wroteNothing } from '../../apps/api/src/http/errors/error.filter';
import { appendLedgerHistory, freshPayments } from '../support/ledger-history';
import { projectToHead, visibleHead } from '../support/project-to-head';
import { poll } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** The sessions of the database other than `client`'s that wait for a table's lock. */
const waitingForATable = async (client: PgClient): Promise<number> =>
  (
    await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND wait_event = 'relation'`,
    )
  ).rows[0]!.n;

/**
 * Runs `read` across a rebuild's reset of `projection`: its tables locked first (as a
 * TRUNCATE locks them), then, once `read` waits for them, what the reset does in one
 * transaction (mark it as being rebuilt, empty the tables, its checkpoint back to zero),
 * committed. So `read` began before the reset and reads the tables after it.
 */
async function acrossAReset<T>(url: string, projection: { name: string; tables: readonly string[] }, read: () => Promise<T>): Promise<T> {
  const rebuild = new PgClient({ connectionString: url });
  await rebuild.connect();
  try {
    await rebuild.query('BEGIN');
    await rebuild.query(`LOCK TABLE ${projection.tables.join(', ')} IN ACCESS EXCLUSIVE MODE`);
    const result = read();
    result.catch(() => undefined);
    await poll(
      () => waitingForATable(rebuild),
      (n) => n >= 1,
      `the read to wait for the tables of ${projection.name}`,
    );
    await rebuild.query(
      `INSERT INTO projection_checkpoints (projection, rebuild_started_at) VALUES ($1, now())
       ON CONFLICT (projection) DO UPDATE SET rebuild_started_at = now(), commit_position = 0, prepare_position = 0, events_applied = 0`,
      [projection.name],
    );
    await rebuild.query(`TRUNCATE ${projection.tables.join(', ')}`);
    await rebuild.query('COMMIT');
    return await result;
  } finally {
    await rebuild.end();
  }
}

describe('reports read by the library while a rebuild empties their read models', () => {
  let db: TestDatabase;
  const LEDGER = { accountId: 'acc-rebuilt', mode: 'live' as const };
  const ENTRIES = 1_200; // three pages of a statement (500)

  beforeAll(async () => {
    db = await createTestDatabase();
    const id = (n: string) => `('10000000-0000-4000-8000-' || lpad(${n}::text, 12, '0'))::uuid`;
    await db.pool.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
       SELECT ${id('n')}, 'acc-rebuilt', 'live', n, 'payment_recorded', 'payment:inv-' || n,
              '2025-01-01T00:00:00Z'::timestamptz + n * interval '1 minute', '0/' || n
       FROM generate_series(1, ${ENTRIES}) AS n`,
    );
    await db.pool.query(
      `INSERT INTO ledger_postings (entry_id, ordinal, account, amount)
       SELECT ${id('n')}, o, CASE o WHEN 0 THEN 'available' ELSE 'acquiring_clearing' END, CASE o WHEN 0 THEN n ELSE -n END
       FROM generate_series(1, ${ENTRIES}) AS n, generate_series(0, 1) AS o`,
    );
    await db.pool.query(
      `INSERT INTO ledger_balances (account_id, mode, account, balance)
       VALUES ('acc-rebuilt', 'live', 'available', ${(ENTRIES * (ENTRIES + 1)) / 2}), ('acc-rebuilt', 'live', 'acquiring_clearing', ${(-ENTRIES * (ENTRIES + 1)) / 2})`,
    );
  }, 60_000);
  afterAll(async () => {
    await db?.drop();
  });

  it('a statement whose ledger a rebuild empties between two pages stops, rather than ending short', async () => {
    const whole = await openAccountStatement(db.pool, LEDGER, new Date('2024-12-31T00:00:00Z'), new Date('2025-02-01T00:00:00Z'));
    let entries = 0;
    for await (const page of whole.pages()) entries += page.length;
    expect(entries).toBe(ENTRIES);

    const reader = await openAccountStatement(db.pool, LEDGER, new Date('2024-12-31T00:00:00Z'), new Date('2025-02-01T00:00:00Z'));
    const pages = reader.pages();
    expect((await pages.next()).value).toHaveLength(500);
    // projections:rebuild: marks, then (after its announce wait) empties in a transaction of its own.
    await announceRebuild(db.pool, [ledgerProjection]);
    await resetForRebuild(db.pool, [ledgerProjection]);
    const stopped = await pages.next().then(
      () => null,
      (error: unknown) => error,
    );
    expect(stopped).toBeInstanceOf(ReadModelRebuildingError);
    expect(stopped).toMatchObject({ projections: ['ledger'] });
    // The API answers it as a route marked @ReadsModels answers during a rebuild: a 503 that wrote nothing.
    const answer = toApiError(stopped);
    expect({ status: answer.status, headers: answer.headers, body: answer.body(), wroteNothing: wroteNothing(stopped) }).toEqual({
      status: 503,
      headers: { 'Retry-After': '5' },
      body: { error: { code: 'provider_unavailable', message: 'Данные (ledger) пересобираются из журнала событий: повторите запрос через 5 секунд' } },
      wroteNothing: true,
    });
    // And a statement opened now is refused at its opening.
    await expect(openAccountStatement(db.pool, LEDGER, new Date('2024-12-31T00:00:00Z'), new Date('2025-02-01T00:00:00Z'))).rejects.toThrow(
      ReadModelRebuildingError,
    );
  });

  it('reconciliation begun before a reset of a read model it reads is refused, not answered from the emptied table', async () => {
    // Read models with nothing in them, none marked: the ledger's entries above name no flow.
    await db.pool.query('TRUNCATE ledger_postings, ledger_entries, ledger_balances');
    await db.pool.query('UPDATE projection_checkpoints SET rebuild_started_at = NULL');
    const [from, to] = [new Date('2025-01-01T00:00:00Z'), new Date('2025-02-01T00:00:00Z')];
    await expect(reconcilePeriod(db.pool, from, to)).resolves.toMatchObject({ differences: [] });

    const report = acrossAReset(db.url, { name: 'payouts', tables: ['payouts'] }, () => reconcilePeriod(db.pool, from, to));
    await expect(report).rejects.toThrow(ReadModelRebuildingError);
    await expect(report).rejects.toMatchObject({ projections: ['payouts'] });
  });
});

describe('the operator snapshots of a read model while a rebuild empties it', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeEach(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
    const n = { i: 0 };
    await appendLedgerHistory(
      store,
      { accountId: 'acc-verified', mode: 'live' },
      freshPayments('inv', 30, () => new Date(Date.UTC(2026, 0, 1, 0, n.i++)).toISOString()),
    );
    await visibleHead(db.pool, store);
    await projectToHead(db.pool, store, ledgerProjection);
  });
  afterEach(async () => {
    await store.close();
    await db.drop();
  });

  it('ledger:verify compares the rows with the checkpoint of the same moment: no false difference', async () => {
    expect((await verifyLedgers(db.pool, store)).problems).toEqual([]);
    const report = await acrossAReset(db.url, ledgerProjection, () => verifyLedgers(db.pool, store));
    expect({ problems: report.problems, comparedAt: report.comparedAt }).toEqual({ problems: [], comparedAt: { commit: 0n, prepare: 0n } });
  });

  it('read-models:checksum prints the emptied table beside its mark and its checkpoint at zero', async () => {
    const before = await readModelsInOneSnapshot(db.pool, [ledgerProjection.name], ['ledger_entries']);
    expect(before.checksums[0]!.rows).toBe(30);
    const during = await acrossAReset(db.url, ledgerProjection, () => readModelsInOneSnapshot(db.pool, [ledgerProjection.name], ['ledger_entries']));
    expect({ rows: during.checksums[0]!.rows, standing: during.standings[0] }).toEqual({
      rows: 0,
      standing: { projection: 'ledger', position: { commit: 0n, prepare: 0n }, rebuilding: true },
    });
  });
});
