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
import { announceRebuild, ReadModelRebuildingError, resetForRebuild, restoreDeferredIndexes } from '#event-store/projections';
import { accountKnown, GetAccountStatement, GetAccountStatementHandler, openAccountStatement, reconcilePeriod } from '#payments/audit';
import { ledgerProjection, ListBalanceTransactions, ListBalanceTransactionsHandler } from '#payments/ledger';
import { verifyLedgers } from '#payments/ledger-verification';
import { allProjections, lockReadModelTables, projectionsNamed, READ_MODEL_TABLES, readModelsInOneSnapshot } from '#payments/read-models';
import { toApiError, wroteNothing } from '../../apps/api/src/http/errors/error.filter';
import { loggedWhenCutOff } from '../../apps/api/src/http/read-models';
import { appendLedgerHistory, freshPayments } from '../support/ledger-history';
import { projectToHead, visibleHead } from '../support/project-to-head';
import { request as httpRequest, IncomingMessage } from 'node:http';
import { logLinesWith, poll, startInvoiceGateway } from '../support/merchant-fixtures';
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
       ON CONFLICT (projection) DO UPDATE SET rebuild_started_at = now(), commit_position = 0, prepare_position = 0, events_applied = 0,
         resets = projection_checkpoints.resets + 1`,
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
  const [FROM, TO] = [new Date('2024-12-31T00:00:00Z'), new Date('2025-02-01T00:00:00Z')];

  /** The ledger of ENTRIES payments to available, one a minute, none marked: as written by its projection (again). */
  async function fillLedger(): Promise<void> {
    const id = (n: string) => `('10000000-0000-4000-8000-' || lpad(${n}::text, 12, '0'))::uuid`;
    await db.pool.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
       SELECT ${id('n')}, 'acc-rebuilt', 'live', n, 'payment_recorded', 'payment:inv-' || n,
              '2025-01-01T00:00:00Z'::timestamptz + n * interval '1 minute', '0/' || n
       FROM generate_series(1, ${ENTRIES}) AS n`,
    );
    await db.pool.query(
      `INSERT INTO ledger_postings (entry_id, ordinal, account, amount, balance_after)
       SELECT ${id('n')}, o, CASE o WHEN 0 THEN 'available' ELSE 'acquiring_clearing' END, CASE o WHEN 0 THEN n ELSE -n END,
              CASE o WHEN 0 THEN n * (n + 1) / 2 ELSE -n * (n + 1) / 2 END
       FROM generate_series(1, ${ENTRIES}) AS n, generate_series(0, 1) AS o`,
    );
    await db.pool.query(
      `INSERT INTO ledger_balances (account_id, mode, account, balance)
       VALUES ('acc-rebuilt', 'live', 'available', ${(ENTRIES * (ENTRIES + 1)) / 2}), ('acc-rebuilt', 'live', 'acquiring_clearing', ${(-ENTRIES * (ENTRIES + 1)) / 2})`,
    );
    await db.pool.query(`UPDATE projection_checkpoints SET rebuild_started_at = NULL WHERE projection = 'ledger'`);
  }

  /** A whole rebuild of the ledger, as projections:rebuild runs it: marked, reset (emptied, counted), filled again, mark cleared. */
  async function rebuildTheLedger(): Promise<void> {
    await announceRebuild(db.pool, [ledgerProjection]);
    await resetForRebuild(db.pool, [ledgerProjection]);
    await fillLedger();
    await restoreDeferredIndexes(db.pool, ledgerProjection.name);
  }

  const refusal = (read: Promise<unknown>) =>
    read.then(
      () => null,
      (error: unknown) => error,
    );

  beforeAll(async () => {
    // Its locks take transaction ids while it polls: on a server of its own (test/support/test-database.ts says why).
    db = await createTestDatabase({ serverOfItsOwn: true });
  });
  beforeEach(async () => {
    await db.pool.query('TRUNCATE ledger_postings, ledger_entries, ledger_balances');
    await fillLedger();
  }, 60_000);
  afterAll(async () => {
    await db?.drop();
  });

  it('a statement whose ledger a reset empties as its next page is read stops, rather than ending short', async () => {
    const whole = await openAccountStatement(db.pool, LEDGER, FROM, TO);
    let entries = 0;
    for await (const page of whole.pages()) entries += page.length;
    expect(entries).toBe(ENTRIES);

    const pages = (await openAccountStatement(db.pool, LEDGER, FROM, TO)).pages();
    expect((await pages.next()).value).toHaveLength(500);
    const stopped = await refusal(acrossAReset(db.url, ledgerProjection, () => pages.next()));
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
    // And while it is marked, a statement is refused at its start.
    await expect(openAccountStatement(db.pool, LEDGER, FROM, TO)).rejects.toThrow(ReadModelRebuildingError);
  });

  it('a streamed answer cut off by a later page is logged, and the error goes on to cut the response', async () => {
    const warned: { fields: object; message: string }[] = [];
    const log = { warn: (fields: object, message: string) => warned.push({ fields, message }) };
    const pages = (await openAccountStatement(db.pool, LEDGER, FROM, TO)).pages();
    const sent: number[] = [];
    const streamed = (async () => {
      for await (const page of loggedWhenCutOff(pages, log, { report: 'statement' })) {
        sent.push(page.length);
        if (sent.length === 1) await rebuildTheLedger();
      }
    })();
    expect(await refusal(streamed)).toBeInstanceOf(ReadModelRebuildingError);
    expect({ sent, warned }).toEqual({
      sent: [500],
      warned: [
        {
          fields: { report: 'statement', chunksProduced: 1, reason: 'read model(s) being rebuilt: ledger' },
          message: 'streamed answer cut off mid-body: the client has an incomplete file',
        },
      ],
    });
  });

  it('a streamed answer whose client went away is not logged as cut off', async () => {
    const warned: object[] = [];
    const pages = (await openAccountStatement(db.pool, LEDGER, FROM, TO)).pages();
    const body = loggedWhenCutOff(pages, { warn: (fields: object) => warned.push(fields) }, { report: 'statement' });
    expect((await body.next()).value).toHaveLength(500);
    // What Fastify's destroy of the body does when the response closes: the generator returns.
    await body.return(undefined);
    expect(warned).toEqual([]);
  });

  it('a statement stops when a whole rebuild of its ledger began and ended between two of its pages', async () => {
    const pages = (await openAccountStatement(db.pool, LEDGER, FROM, TO)).pages();
    expect((await pages.next()).value).toHaveLength(500);
    await rebuildTheLedger();
    expect(await refusal(pages.next())).toMatchObject({ projections: ['ledger'] });
    // A statement opened after it reads the rebuilt ledger.
    let entries = 0;
    for await (const page of (await openAccountStatement(db.pool, LEDGER, FROM, TO)).pages()) entries += page.length;
    expect(entries).toBe(ENTRIES);
  });

  it('a balance-transactions export stops when its ledger is reset, or rebuilt whole, between two of its pages', async () => {
    const list = new ListBalanceTransactionsHandler(db.pool);
    const filter = { accountId: LEDGER.accountId, mode: LEDGER.mode, limit: 500 };
    const first = await list.execute(new ListBalanceTransactions({ ...filter, before: null }));
    expect(first.items).toHaveLength(500);
    const next = () => list.execute(new ListBalanceTransactions({ ...filter, before: first.items[499]!.position }, first.rebuildState));
    expect((await next()).items).toHaveLength(500);

    await rebuildTheLedger();
    expect(await refusal(next())).toMatchObject({ projections: ['ledger'] });
    expect(await refusal(acrossAReset(db.url, ledgerProjection, () => list.execute(new ListBalanceTransactions({ ...filter, before: null }))))).toBeInstanceOf(
      ReadModelRebuildingError,
    );
  });

  it('while the ledger is rebuilt, its statement is refused, but whether an account is known is still answered', async () => {
    await announceRebuild(db.pool, [ledgerProjection]);
    await expect(new GetAccountStatementHandler(db.pool).execute(new GetAccountStatement(LEDGER, FROM, TO))).rejects.toThrow(ReadModelRebuildingError);
    // The operator's balance from the log asks it (and falls back to the log): it must not answer 503 for the whole rebuild.
    expect(await accountKnown(db.pool, LEDGER.accountId)).toEqual({ known: true, rebuild: { marked: ['ledger'], resets: expect.any(String) } });
  });

  it('every read-model table counts its emptying for its projection, whoever empties it', async () => {
    const { rows } = await db.pool.query<{ table: string; projection: string }>(
      `SELECT c.relname AS table, replace(encode(t.tgargs, 'escape'), '\\000', '') AS projection FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE t.tgfoid = 'count_projection_reset'::regproc AND t.tgtype = 32 AND c.relname = ANY($1::text[])`,
      [READ_MODEL_TABLES],
    );
    const counted = Object.fromEntries(rows.map((r) => [r.table, r.projection]));
    expect(counted).toEqual(Object.fromEntries(allProjections.flatMap((p) => p.tables.map((t) => [t, p.name]))));
    const resets = async () =>
      (await db.pool.query<{ n: string }>(`SELECT resets AS n FROM projection_checkpoints WHERE projection = 'ledger'`)).rows[0]?.n ?? '0';
    const before = BigInt(await resets());
    await db.pool.query('TRUNCATE ledger_open_holds');
    expect(BigInt(await resets())).toBe(before + 1n);
  });

  it('projections:rebuild resets the read models named in the one order of the tables, whatever order they are named in', () => {
    expect(projectionsNamed(['payouts', 'ledger', 'invoices']).map((p) => p.name)).toEqual(['ledger', 'invoices', 'payouts']);
    expect(projectionsNamed([]).map((p) => p.name)).toEqual(allProjections.map((p) => p.name));
  });

  it('reconciliation begun before a reset of a read model it reads is refused, not answered from the emptied table', async () => {
    // Read models with nothing in them, none marked: the ledger's entries above name no flow.
    await db.pool.query('TRUNCATE ledger_postings, ledger_entries, ledger_balances');
    const [from, to] = [new Date('2025-01-01T00:00:00Z'), new Date('2025-02-01T00:00:00Z')];
    await expect(reconcilePeriod(db.pool, from, to)).resolves.toMatchObject({ differences: [] });

    const report = acrossAReset(db.url, { name: 'payouts', tables: ['payouts'] }, () => reconcilePeriod(db.pool, from, to));
    await expect(report).rejects.toThrow(ReadModelRebuildingError);
    await expect(report).rejects.toMatchObject({ projections: ['payouts'] });
  });

  it('readers lock the read-model tables in the order a reset truncates them, whatever order they name them in', async () => {
    // A TRUNCATE under way holds ledger_entries: a reader that asks for (entries, postings) in that order would wait
    // holding nothing; in the reset's order it holds postings (first) and waits for entries, as the TRUNCATE would.
    const truncating = new PgClient({ connectionString: db.url });
    await truncating.connect();
    const reader = await db.pool.connect();
    try {
      await truncating.query('BEGIN');
      await truncating.query('LOCK TABLE ledger_entries IN ACCESS EXCLUSIVE MODE');
      await reader.query('BEGIN');
      const locked = lockReadModelTables(reader, ['ledger_entries', 'ledger_postings']);
      locked.catch(() => undefined);
      await poll(
        async () =>
          (
            await truncating.query<{ relation: string; granted: boolean }>(
              `SELECT c.relname AS relation, l.granted FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
               WHERE l.pid <> pg_backend_pid() AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND c.relname IN ('ledger_entries', 'ledger_postings') AND l.mode = 'AccessShareLock' ORDER BY c.relname`,
            )
          ).rows,
        (rows) => rows.some((r) => !r.granted),
        'the reader to wait for ledger_entries',
      ).then((rows) =>
        expect(rows).toEqual([
          { relation: 'ledger_entries', granted: false },
          { relation: 'ledger_postings', granted: true },
        ]),
      );
      await truncating.query('COMMIT');
      await locked;
    } finally {
      // The holder first: the reader may still wait for it.
      await truncating.end();
      await reader.query('ROLLBACK').catch(() => undefined);
      reader.release();
    }
  });
});

describe('the operator snapshots of a read model while a rebuild empties it', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeEach(async () => {
    db = await createTestDatabase({ serverOfItsOwn: true });
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

describe('a reset while a reader still holds the tables', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ serverOfItsOwn: true });
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('a reader that took one table and asks for another the reset holds does not deadlock with it', async () => {
    await db.pool.query('TRUNCATE ledger_postings, ledger_entries, ledger_balances');
    await db.pool.query(`UPDATE projection_checkpoints SET rebuild_started_at = NULL`);
    // A statement's reader in its transaction: it has read the entries; next it reads the postings.
    const reader = new PgClient({ connectionString: db.url, application_name: 'gateway-api' });
    await reader.connect();
    let reset: Promise<void> | undefined;
    try {
      await reader.query('BEGIN');
      await reader.query('SELECT 1 FROM ledger_entries LIMIT 1');
      reset = resetForRebuild(db.pool, [ledgerProjection]);
      reset.catch(() => undefined);
      // The reset holds the postings (its first table) and waits for the entries, which the reader holds.
      await poll(
        async () =>
          (
            await db.pool.query<{ relation: string; granted: boolean }>(
              `SELECT c.relname AS relation, l.granted FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                WHERE l.mode = 'AccessExclusiveLock' AND c.relname IN ('ledger_postings', 'ledger_entries')
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY 1`,
            )
          ).rows,
        (rows) => rows.length === 2 && rows[0]!.relation === 'ledger_entries' && !rows[0]!.granted && rows[1]!.granted,
        'the reset to hold the postings and wait for the entries',
        10_000,
      );
      // The reader asks for the postings: a cycle while the reset waits; it steps out instead of either being its victim.
      await expect(reader.query('SELECT 1 FROM ledger_postings LIMIT 1')).resolves.toBeDefined();
      await reader.query('COMMIT');
      await expect(reset).resolves.toBeUndefined();
    } finally {
      await reader.end();
      await reset?.catch(() => undefined);
    }
  }, 60_000);

  it('steps out of the lock queue in turns, naming the holder, so that other readers are not held behind it; then empties', async () => {
    await db.pool.query(`INSERT INTO ledger_balances (account_id, mode, account, balance) VALUES ('acc-held', 'live', 'available', 1)`);
    // A ledger:verify under way: its tables locked in its snapshot's transaction.
    const verify = new PgClient({ connectionString: db.url, application_name: 'gateway-ledger-verify' });
    await verify.connect();
    const waits: (readonly string[])[] = [];
    let reset: Promise<void> | undefined;
    try {
      await verify.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      await lockReadModelTables(verify, ['ledger_balances']);
      reset = resetForRebuild(db.pool, [ledgerProjection], { onWait: (holders) => waits.push(holders) });
      reset.catch(() => undefined);
      await poll(
        async () => waits.length,
        (n) => n >= 1,
        'the reset to step out of the queue',
      );
      expect(waits[0]).toEqual([expect.stringMatching(/^gateway-ledger-verify \(pid \d+\)$/)]);
      // Another reader of the table gets through while the reset still waits (behind a waiting TRUNCATE it would wait for good).
      const read = db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ledger_balances');
      read.catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      const stuck = new Promise((resolve) => (timer = setTimeout(() => resolve('stuck'), 15_000)));
      const readOrStuck = await Promise.race([read.then((r) => r.rows[0]!.n), stuck]).finally(() => clearTimeout(timer));
      expect(readOrStuck).toBe(1);
    } finally {
      await verify.end();
    }
    await reset;
    expect((await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ledger_balances')).rows[0]!.n).toBe(0);
  }, 60_000);
});

// The CSV's pages read the ledger's rebuild state of its first page (`since`): the route must hand it on, page to page.
describe('a merchant downloading the balance-transactions CSV while the ledger is emptied', () => {
  it('gets a file cut off, never a clean end with rows missing, and the gateway logs the cut', async () => {
    const gw = await startInvoiceGateway();
    try {
      const merchant = await gw.operator.merchant();
      // Far more pages (1,000 rows, 300 KB with the long invoice ids) than sockets buffer while the client does not read
      // (18 MB): the export waits mid-file.
      const ENTRIES = 60_000;
      const id = (n: string) => `('20000000-0000-4000-8000-' || lpad(${n}::text, 12, '0'))::uuid`;
      await gw.db.pool.query(
        `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
         SELECT ${id('n')}, $1, 'test', n, 'payment_recorded', 'payment:inv-' || n || '-' || repeat('x', 200),
                '2025-01-01T00:00:00Z'::timestamptz + n * interval '1 minute', '0/' || n
         FROM generate_series(1, ${ENTRIES}) AS n`,
        [merchant.accountId],
      );
      await gw.db.pool.query(
        `INSERT INTO ledger_postings (entry_id, ordinal, account, amount, balance_after)
         SELECT ${id('n')}, o, CASE o WHEN 0 THEN 'available' ELSE 'acquiring_clearing' END, CASE o WHEN 0 THEN n ELSE -n END,
                CASE o WHEN 0 THEN n * (n + 1) / 2 ELSE -n * (n + 1) / 2 END
         FROM generate_series(1::bigint, ${ENTRIES}) AS n, generate_series(0, 1) AS o`,
      );
      const requestId = `csv-cut-${merchant.accountId}`;
      const response = await new Promise<IncomingMessage>((resolve, reject) => {
        const request = httpRequest(`${gw.baseUrl}/v1/balance/transactions?format=csv`, {
          agent: false,
          headers: { authorization: `Bearer ${merchant.keys.test.secretKey}`, 'x-request-id': requestId },
        });
        request.once('response', (r) => (r.pause(), resolve(r)));
        request.once('error', reject);
        request.end();
      });
      expect(response.statusCode).toBe(200);
      // The first page has come (more than the header); the export has sent what the sockets take and waits. The ledger is
      // then emptied by hand (counted as a reset).
      await poll(
        async () => response.readableLength,
        (n) => n > 1_000,
        'the first page of the file',
      );
      await gw.db.pool.query('TRUNCATE ledger_postings, ledger_entries, ledger_balances');
      let rows = -1; // the header
      let cut: unknown = null;
      try {
        for await (const chunk of response) rows += String(chunk).split('\n').length - 1;
      } catch (error) {
        cut = error;
      }
      // Old (the route not handing the state on): a clean end, tens of thousands of rows short.
      expect({ cut: cut !== null, whole: rows === ENTRIES }).toEqual({ cut: true, whole: false });
      await poll(
        async () => logLinesWith(gw.gateway, requestId).filter((l) => /streamed answer cut off mid-body/.test(String(l.msg))).length,
        (n) => n === 1,
        'the cut to be logged',
      );
    } finally {
      await gw.close();
    }
  }, 120_000);
});
