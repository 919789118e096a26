/**
 * ledger:verify (verifyLedgers) replays every ledger two ways: in two passes with
 * memory bounded by the number of ledgers and the longest ledger (pass 1 in log order,
 * pass 2 each ledger's stream), or, as ledger:verify
 * runs on PostgreSQL, every ledger at once from the ledger events a read of the whole
 * log in log order hands on (verifyEventLog's `forward`, decision 0123), with repeated
 * causes and entry ids found by the database. Each kind of corruption it reports is
 * planted here, in the log or in the read model, and must be found, naming its ledger,
 * both ways alike; a clean history passes.
 */
import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '#event-store';
import { LedgerEvent, LedgerId, ledgerEntryId, ledgerStreamName } from '#ledger';
import { verifyLedgers, VerifyProblem, VerifyReport } from '#payments/ledger-verification';
import { ledgerProjection } from '#payments/read-models';
import { appendLedgerHistory, freshPayments } from '../support/ledger-history';
import { projectToHead, visibleHead } from '../support/project-to-head';
import { poll } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { verifyLedgersInLogOrder } from '../support/verify-ledgers-in-log-order';

let db: TestDatabase;
let store: PostgresEventStore;
const a: LedgerId = { accountId: randomUUID(), mode: 'live' };
const b: LedgerId = { accountId: randomUUID(), mode: 'test' };
let aEvents: LedgerEvent[];
let bEvents: LedgerEvent[];

const at = (minute: number) => new Date(Date.parse('2026-04-01T00:00:00Z') + minute * 60_000).toISOString();

beforeEach(async () => {
  db = await createTestDatabase();
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  aEvents = (
    await appendLedgerHistory(store, a, [
      { type: 'RecordPayment', invoiceId: 'a-1', netAmount: 10_000, feeAmount: 100, releaseAt: null, at: at(1) },
      { type: 'RecordPayment', invoiceId: 'a-2', netAmount: 5_000, feeAmount: 50, releaseAt: at(30), at: at(2) },
      { type: 'ReleaseHold', invoiceId: 'a-2', at: at(31) },
    ])
  ).events;
  bEvents = (
    await appendLedgerHistory(store, b, [
      { type: 'RecordPayment', invoiceId: 'b-1', netAmount: 3_000, feeAmount: 30, releaseAt: null, at: at(1) },
      { type: 'ReserveFunds', reservationId: 'b-r1', purpose: 'refund', amount: 1_000, at: at(2) },
    ])
  ).events;
  // ledger:verify reads the visible log: wait until no transaction of another test database hides it.
  await visibleHead(db.pool, store);
});
afterEach(async () => {
  await store.close();
  await db.drop();
});

/** Appends raw entries to a ledger's stream (a log written by something other than the gateway). */
async function plant(ledger: LedgerId, data: readonly LedgerEvent['data'][]): Promise<void> {
  await store.appendToStream(
    ledgerStreamName(ledger),
    data.map((d) => ({ id: randomUUID(), type: 'LedgerEntryPosted', data: d })),
  );
}

const byText = (problems: readonly VerifyProblem[]) => [...problems].sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));

/**
 * verifyLedgers both ways, after checking that they report the same (problems in any
 * order): following the ledger events through the log (pass 1) and each ledger's stream,
 * and every ledger from one read in log order.
 */
async function verifyBothWays(): Promise<VerifyReport> {
  const followed = await verifyLedgers(db.pool, store);
  const inLogOrder = await verifyLedgersInLogOrder(db.pool, store);
  const { problems: inOrderProblems, eventsRead: _inOrderRead, ...inOrderRest } = inLogOrder;
  const { problems: followedProblems, eventsRead: _followedRead, ...followedRest } = followed;
  expect(inOrderRest).toEqual(followedRest);
  expect(byText(inOrderProblems)).toEqual(byText(followedProblems));
  // Pass 1 read each ledger event once more than the read in log order replays it.
  expect(followed.eventsRead).toBe(2 * inLogOrder.eventsRead);
  return followed;
}

async function problems(): Promise<VerifyProblem[]> {
  await projectToHead(db.pool, store, ledgerProjection);
  return [...(await verifyBothWays()).problems];
}

const A = ledgerStreamName(a);
const B = ledgerStreamName(b);

describe('ledger:verify finds each corruption', () => {
  it('passes a clean history', async () => {
    const report = await verifyBothWays();
    expect(report.problems).toEqual([]);
    expect({ ledgers: report.ledgers, entries: report.entries }).toEqual({ ledgers: 2, entries: 5 });
  });

  it('passes a ledger whose only entry posted nothing (a refused reservation): it has no balances row, and all zero is what it holds', async () => {
    const c: LedgerId = { accountId: randomUUID(), mode: 'live' };
    await appendLedgerHistory(store, c, [{ type: 'ReserveFunds', reservationId: 'po_1', purpose: 'payout', amount: 10_000, recordRefusal: true, at: at(5) }]);
    await visibleHead(db.pool, store);
    expect(await problems()).toEqual([]);
    const rows = await db.pool.query('SELECT 1 FROM ledger_balances WHERE account_id = $1', [c.accountId]);
    expect(rows.rowCount).toBe(0);
  });

  it('a cause posted twice in one ledger (and so its entry id twice)', async () => {
    const first = aEvents[0]!.data;
    await plant(a, [{ ...first, occurredAt: at(40) }]);
    const found = await problems();
    expect(found).toEqual(
      expect.arrayContaining([
        { ledger: A, kind: 'duplicate_cause', detail: `cause ${first.cause} posted again by entry ${first.entryId}` },
        { ledger: A, kind: 'duplicate_entry', detail: `entry ${first.entryId}` },
      ]),
    );
  });

  it('an entry id of one ledger used again in another, for another cause', async () => {
    const taken = aEvents[0]!.data.entryId;
    await plant(b, [
      {
        entryId: taken,
        kind: 'reservation_released',
        cause: 'release:b-r1',
        postings: [],
        occurredAt: at(50),
        reservation: { id: 'b-r0', purpose: 'refund', amount: 0 },
      },
    ]);
    expect(await problems()).toContainEqual({ ledger: B, kind: 'duplicate_entry', detail: `entry ${taken}` });
  });

  it('an entry that does not balance', async () => {
    const cause = 'manual:unbalanced';
    await plant(b, [
      { entryId: ledgerEntryId(b, cause), kind: 'payment_recorded', cause, postings: [{ account: 'available', amount: 100 }], occurredAt: at(60) },
    ]);
    expect(await problems()).toContainEqual(expect.objectContaining({ ledger: B, kind: 'invariant', detail: expect.stringContaining('entry_unbalanced') }));
  });

  it('passes an entry dated in a form toISOString never writes (hour 24): as the database stores it, the next day', async () => {
    const cause = 'manual:midnight';
    await plant(b, [
      {
        entryId: ledgerEntryId(b, cause),
        kind: 'payment_recorded',
        cause,
        postings: [
          { account: 'available', amount: 100 },
          { account: 'acquiring_clearing', amount: -100 },
        ],
        occurredAt: '2026-04-01T24:00:00.000Z',
      },
    ]);
    expect(await problems()).toEqual([]);
  });

  it('a revision missing from a ledger stream', async () => {
    await db.pool.query(`UPDATE events SET stream_revision = stream_revision + 5 WHERE stream_name = $1 AND stream_revision = 2`, [A]);
    expect(await problems()).toContainEqual({ ledger: A, kind: 'revision_gap', detail: 'revision 7 after 1' });
  });

  it('a read model that lost an entry, a ledger, or holds one the log has not', async () => {
    await projectToHead(db.pool, store, ledgerProjection);
    await db.pool.query(`DELETE FROM ledger_entries WHERE entry_id = $1`, [aEvents[2]!.data.entryId]);
    await db.pool.query(`DELETE FROM ledger_balances WHERE account_id = $1`, [b.accountId]);
    await db.pool.query(`INSERT INTO ledger_balances (account_id, mode, account, balance) VALUES ($1, 'live', 'available', 0)`, [randomUUID()]);
    const found = (await verifyBothWays()).problems;
    expect(found).toContainEqual({ ledger: A, kind: 'entry_count_differs', detail: 'log has 3 entries, read model 2' });
    expect(found).toContainEqual({ ledger: B, kind: 'missing_in_read_model', detail: 'no balances in the read model' });
    expect(found).toContainEqual(expect.objectContaining({ kind: 'unknown_in_read_model' }));
    expect(bEvents).toHaveLength(2);
  });
  it('entry counts that differ name the first entry one side has and the other not: a deleted entry, a forged one', async () => {
    await projectToHead(db.pool, store, ledgerProjection);
    const middle = aEvents[1]!.data.entryId;
    await db.pool.query(`DELETE FROM ledger_postings WHERE entry_id = $1`, [middle]);
    await db.pool.query(`DELETE FROM ledger_entries WHERE entry_id = $1`, [middle]);
    await db.pool.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
       VALUES (gen_random_uuid(), $1, 'test', 7, 'payment_recorded', 'payment:forged', now(), '1/1')`,
      [b.accountId],
    );
    const found = (await verifyBothWays()).problems;
    expect(found).toContainEqual({ ledger: A, kind: 'entry_count_differs', detail: 'log has 3 entries, read model 2' });
    expect(found).toContainEqual({ ledger: B, kind: 'entry_count_differs', detail: 'log has 2 entries, read model 3' });
    const located = found.filter((p) => p.kind === 'entries_differ');
    expect(located).toHaveLength(2);
    expect(located.find((p) => p.ledger === A)?.detail).toMatch(new RegExp(`^entry at revision 1: log gives .*${middle}.*a-2.*, read model has no row$`));
    expect(located.find((p) => p.ledger === B)?.detail).toMatch(/^entry at revision 7: log gives no entry, read model has .*payment:forged/);
  });
  it('a row at a negative seq is named first, not an edited entry after it', async () => {
    await projectToHead(db.pool, store, ledgerProjection);
    await db.pool.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
       VALUES (gen_random_uuid(), $1, 'live', -1, 'payment_recorded', 'payment:forged', now(), '1/1')`,
      [a.accountId],
    );
    await db.pool.query(`UPDATE ledger_entries SET cause = 'payment:edited' WHERE account_id = $1 AND seq = 1`, [a.accountId]);
    const located = (await verifyBothWays()).problems.filter((p) => p.kind === 'entries_differ');
    expect(located).toEqual([
      { ledger: A, kind: 'entries_differ', detail: expect.stringMatching(/^entry at revision -1: log gives no entry, read model has .*payment:forged/) },
    ]);
  });
  it('the projector moving on while ledger:verify runs: the forged row is named, not an entry written after the checkpoint', async () => {
    await projectToHead(db.pool, store, ledgerProjection);
    await db.pool.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
       VALUES (gen_random_uuid(), $1, 'live', 1000, 'payment_recorded', 'payment:forged', now(), '1/1')`,
      [a.accountId],
    );
    // The first read of a stream (locating the entry that differs, in log order): an entry of a
    // is posted and projected first, after the read model's snapshot was taken.
    let moved = false;
    const moving = new Proxy(store, {
      get(target, property, receiver) {
        if (property !== 'readStream') return Reflect.get(target, property, receiver) as unknown;
        return async (...args: Parameters<PostgresEventStore['readStream']>) => {
          if (!moved) {
            moved = true;
            await appendLedgerHistory(
              store,
              a,
              [{ type: 'RecordPayment', invoiceId: 'a-3', netAmount: 1_000, feeAmount: 10, releaseAt: null, at: at(40) }],
              aEvents,
            );
            await visibleHead(db.pool, store);
            await projectToHead(db.pool, store, ledgerProjection);
          }
          return target.readStream(...args);
        };
      },
    });
    const found = (await verifyLedgersInLogOrder(db.pool, moving)).problems;
    expect(moved).toBe(true);
    expect((await db.pool.query('SELECT 1 FROM ledger_entries WHERE account_id = $1 AND seq = 3', [a.accountId])).rowCount).toBe(1);
    expect(found).toEqual([
      { ledger: A, kind: 'entry_count_differs', detail: 'log has 3 entries, read model 4' },
      { ledger: A, kind: 'entries_differ', detail: expect.stringMatching(/^entry at revision 1000: log gives no entry, read model has .*payment:forged/) },
    ]);
  });
  it('a forged row at the seq the log has next, past the checkpoint (the projector stuck on it), is named', async () => {
    await projectToHead(db.pool, store, ledgerProjection);
    // The forged row takes seq 3: the genuine entry 3 can no longer be projected (UNIQUE (account_id, mode, seq)).
    await db.pool.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
       VALUES (gen_random_uuid(), $1, 'live', 3, 'payment_recorded', 'payment:forged', now(), '1/1')`,
      [a.accountId],
    );
    await appendLedgerHistory(store, a, [{ type: 'RecordPayment', invoiceId: 'a-3', netAmount: 1_000, feeAmount: 10, releaseAt: null, at: at(40) }], aEvents);
    await visibleHead(db.pool, store);
    const found = (await verifyBothWays()).problems;
    expect(found).toEqual([
      { ledger: A, kind: 'entry_count_differs', detail: 'log has 3 entries, read model 4' },
      {
        ledger: A,
        kind: 'entries_differ',
        detail: expect.stringMatching(/^entry at revision 3: log gives it only after the checkpoint, read model has a row .*payment:forged/),
      },
    ]);
  });
  it('a verification failing while the read model is digested returns only when its transaction has ended', async () => {
    await projectToHead(db.pool, store, ledgerProjection);
    const locker = await db.pool.connect();
    try {
      // The digest of the rows (the first of its reads to plan on the postings) waits on this lock of their index, held
      // by REINDEX: it is still running when the log fails. (A lock of the table would stop the verification before its
      // snapshot, where it locks the tables it reads; REINDEX's own lock of the table does not conflict with that.)
      await locker.query('BEGIN');
      await locker.query('REINDEX INDEX ledger_postings_pkey');
      const lockerPid = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const unreachable = new Proxy(store, {
        get(target, property, receiver) {
          // Fails once the digest waits for the lock.
          if (property === 'headPosition')
            return async () => {
              await poll(
                async () =>
                  (
                    await locker.query<{ n: number }>(
                      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
                         AND wait_event_type = 'Lock' AND query LIKE '%string_agg%ledger_postings%'`,
                    )
                  ).rows[0]!.n,
                (n) => n >= 1,
                'the digest to wait for the lock',
              );
              throw new Error('the log is unreachable');
            };
          return Reflect.get(target, property, receiver) as unknown;
        },
      });
      await expect(verifyLedgers(db.pool, unreachable)).rejects.toThrow('the log is unreachable');
      const open = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> $1 AND xact_start IS NOT NULL`,
        [lockerPid],
      );
      expect(open.rows[0]!.n).toBe(0);
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
    }
  });
  it('rows the read model holds for a ledger whose entries all come after its checkpoint', async () => {
    await projectToHead(db.pool, store, ledgerProjection);
    const c: LedgerId = { accountId: randomUUID(), mode: 'live' };
    await appendLedgerHistory(store, c, [{ type: 'RecordPayment', invoiceId: 'c-1', netAmount: 700, feeAmount: 7, releaseAt: null, at: at(9) }]);
    await visibleHead(db.pool, store);
    // Forged: what a statement of c would be drawn from, before the projection reached c's entries.
    await db.pool.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
       VALUES (gen_random_uuid(), $1, 'live', 0, 'payment_recorded', 'payment:forged', now(), '1/1')`,
      [c.accountId],
    );
    await db.pool.query(`INSERT INTO ledger_balances (account_id, mode, account, balance) VALUES ($1, 'live', 'available', 1000000)`, [c.accountId]);
    const found = (await verifyBothWays()).problems;
    const C = ledgerStreamName(c);
    expect(found).toContainEqual({ ledger: C, kind: 'balance_differs', detail: 'available: log says 0, read model says 1000000' });
    expect(found).toContainEqual({ ledger: C, kind: 'entry_count_differs', detail: 'log has 0 entries, read model 1' });
  });

  it('a ledger of more than ten chunks of 1,024 entries: clean, it passes; an entry of its eleventh chunk edited is named', async () => {
    // The database digests the stored rows chunk by chunk, the tool the log's: chunks must meet in the same order.
    const long: LedgerId = { accountId: randomUUID(), mode: 'live' };
    let minute = 100;
    await appendLedgerHistory(
      store,
      long,
      freshPayments('long', 10_300, () => at(minute++)),
    );
    await visibleHead(db.pool, store);
    expect(await problems()).toEqual([]);
    await db.pool.query(`UPDATE ledger_entries SET cause = cause || 'x' WHERE account_id = $1 AND seq = 10299`, [long.accountId]);
    const found = (await verifyBothWays()).problems;
    expect(found).toEqual([expect.objectContaining({ ledger: ledgerStreamName(long), kind: 'entries_differ' })]);
    expect(found[0]!.detail).toMatch(/^entry at revision 10299: log gives /);
  }, 180_000);
  it('a row moved to the far end of seq (2^63 - 1, -2^63) is found, without reading every chunk between', async () => {
    await projectToHead(db.pool, store, ledgerProjection);
    for (const far of ['9223372036854775807', '-9223372036854775808']) {
      await db.pool.query(`UPDATE ledger_entries SET seq = $2 WHERE entry_id = $1`, [aEvents[2]!.data.entryId, far]);
      const found = (await verifyBothWays()).problems;
      expect(found).toEqual([expect.objectContaining({ ledger: A, kind: 'entries_differ' })]);
      await db.pool.query(`UPDATE ledger_entries SET seq = 2 WHERE entry_id = $1`, [aEvents[2]!.data.entryId]);
    }
    expect(await problems()).toEqual([]);
  }, 120_000);
});
