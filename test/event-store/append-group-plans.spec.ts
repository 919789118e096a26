/**
 * The plans append_event_group keeps (event-store:0001). PL/pgSQL caches the plan of each
 * statement of a function per session, and after five calls it may keep a generic plan
 * made from the statistics of that moment. A gateway starts on an empty (or young) log:
 * the duplicate-id check planned then as a scan of the whole events table was kept by the
 * pool's long-lived connections while the log grew, so every grouped append read the
 * whole log (seen in the HTTP and event-store benches: thousands of full scans of
 * `events` per second, PostgreSQL CPU per POST rising with the history). Each statement
 * of the function must find its rows by index whatever the statistics were when it was
 * first planned: on an empty log, and on a log of a few thousand events, where a hash
 * join over the whole table looked cheaper to the planner than the 100 index probes it
 * assumes for a jsonb array. Real PostgreSQL, a database of each test's own and one
 * connection, so that every call shares one session's plan cache (the statistics are
 * flushed before they are read).
 */
import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '#event-store';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;
let store: PostgresEventStore;

beforeEach(async () => {
  db = await createTestDatabase({ poolSize: 1 });
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
});
afterEach(async () => {
  await store.close();
  await db.drop();
});

const event = () => ({ id: randomUUID(), type: 'InvoiceCreated', data: { amount: '1000.00', orderId: randomUUID() } });

/** Appends `groups` groups of `size` appends, each group made in one turn (one call of append_event_group). */
async function appendGroups(groups: number, size: number): Promise<void> {
  for (let g = 0; g < groups; g++) {
    await Promise.all(Array.from({ length: size }, () => store.appendToStream(`invoice-${randomUUID()}`, [event()], { expectedRevision: 'no_stream' })));
  }
}

/** `count` events written straight to the table, without an ANALYZE (as between two runs of autovacuum). */
async function growLog(count: number): Promise<void> {
  await db.pool.query(
    `INSERT INTO events (stream_name, stream_revision, event_id, event_type, data, metadata, chain_hash)
     SELECT 'bulk-' || n || '-' || gen_random_uuid(), 0, gen_random_uuid(), 'InvoiceCreated', '{}'::jsonb, '{}'::jsonb, sha256(n::text::bytea)
     FROM generate_series(1, $1::int) AS n`,
    [count],
  );
}

/**
 * Rows of `events` and `event_streams` read so far, by sequential scans and through
 * indexes (the session's pending counts flushed first): a plan that walks a whole index
 * (a hash or merge join over it) reads every row as surely as a sequential scan.
 */
async function rowsRead(): Promise<number> {
  await db.pool.query('SELECT pg_stat_force_next_flush()');
  await db.pool.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await db.pool.query<{ n: string }>(
    `SELECT (sum(seq_tup_read) + sum(coalesce(idx_tup_fetch, 0)))::text AS n FROM pg_stat_user_tables WHERE relname IN ('events', 'event_streams')`,
  );
  return Number(rows[0]!.n);
}

const invoiceEvents = async () => (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE stream_name LIKE 'invoice-%'`)).rows[0]!.n;

describe('append_event_group looks its rows up by key', () => {
  it('planned on an empty log, it still does once the log has grown', async () => {
    // More calls than the five custom plans after which PL/pgSQL may keep a generic one.
    await appendGroups(10, 4);
    await growLog(20_000);
    const before = await rowsRead();
    await appendGroups(3, 4);
    // New streams and ids: nothing to find.
    expect((await rowsRead()) - before).toBe(0);
    expect(await invoiceEvents()).toBe(52);
  });

  it('planned on a log of 5,000 events, it does not read the whole log per append', async () => {
    await growLog(5_000);
    const before = await rowsRead();
    await appendGroups(10, 4);
    expect((await rowsRead()) - before).toBe(0);
    expect(await invoiceEvents()).toBe(40);
  });
});
