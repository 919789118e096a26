/**
 * The one-pass rebuild (rebuildProjectionsTogether, what `projections:rebuild` runs):
 * every read model rebuilt from one read of the log equals, table by table, what the
 * live projector's runners built on the same seeded random history; a projection a
 * runner holds is left to that runner and followed; and the locks the rebuild holds
 * are the runners' own, so a runner waits in standby until the rebuild lets go and
 * then follows from its checkpoint.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { AllFilter, comparePositions, EventStore, matchesAnyFilter, matchesFilter, PostgresEventStore, RecordedEvent } from '#event-store';
import {
  applyBatchWithCheckpoint,
  deferAutovacuum,
  deferSecondaryIndexes,
  HeldProjectionLocks,
  Projection,
  PROJECTION_LOCK_NAMESPACE,
  ProjectionHeldError,
  ProjectionRunner,
  readCheckpoint,
  rebuildProjectionsTogether,
} from '#event-store/projections';
import { inTransaction } from '#platform/database';
import { loadConfig } from '#payments/composition';
import {
  allProjections,
  invoicesProjection,
  payoutsProjection,
  streamCatalogProjection,
  readModelChecksums,
  refundsProjection,
  rowDigests,
  TableChecksum,
} from '#payments/read-models';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { seedLoad } from '../../apps/tools/src/seed/seed-load';
import { projectToHead, visibleHead } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { seededRandom } from '../support/test-seed';

let db: TestDatabase;
let store: PostgresEventStore;
let live: TableChecksum[];
/** The read models' indexes as the migrations made them. */
let indexes: IndexDefinition[];

interface IndexDefinition {
  readonly indexname: string;
  readonly indexdef: string;
}
/** Every index of the read models' tables, with its definition. */
async function readModelIndexes(): Promise<IndexDefinition[]> {
  const tables = allProjections.flatMap((p) => p.tables);
  const rows = await db.pool.query<IndexDefinition>(
    `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = ANY($1::text[]) ORDER BY indexname`,
    [tables],
  );
  return rows.rows;
}
const deferredIndexes = async () => (await db.pool.query('SELECT projection, index_name FROM projection_deferred_indexes')).rows;
/** The read models' tables with autovacuum switched off (reloptions), and the records of a rebuild that switched it off. */
async function autovacuumPaused(): Promise<{ off: string[]; recorded: string[] }> {
  const tables = allProjections.flatMap((p) => p.tables);
  const off = await db.pool.query<{ t: string }>(
    `SELECT relname AS t FROM pg_class WHERE relname = ANY($1::text[]) AND 'autovacuum_enabled=false' = ANY(coalesce(reloptions, '{}')) ORDER BY 1`,
    [tables],
  );
  const recorded = await db.pool.query<{ t: string }>('SELECT table_name AS t FROM projection_deferred_autovacuum ORDER BY 1');
  return { off: off.rows.map((r) => r.t), recorded: recorded.rows.map((r) => r.t) };
}
/** How many times each read-model table has been analyzed (by hand or by autovacuum). */
async function analyzeCounts(): Promise<Map<string, number>> {
  const rows = await db.pool.query<{ t: string; n: string }>(
    `SELECT relname AS t, analyze_count + autoanalyze_count AS n FROM pg_stat_user_tables WHERE relname = ANY($1::text[])`,
    [allProjections.flatMap((p) => p.tables)],
  );
  return new Map(rows.rows.map((r) => [r.t, Number(r.n)]));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  db = await createTestDatabase();
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  const rng = seededRandom('one-pass rebuild');
  await seedLoad(
    { pool: db.pool, store, terms: loadConfig({}), secrets: new SecretBox(fixedKeys([randomBytes(32)])) },
    { events: 5_000, seed: String(rng.int(0, 1_000_000_000)), days: rng.int(5, 10) },
  );
  // (At least 5 simulated days: a shorter history can end before any payout, and every table must be exercised.)
  // The live projector's way: each projection's runner over the log, in batches of its own size.
  for (const projection of allProjections) await projectToHead(db.pool, store, projection, rng.int(1, 500));
  live = await readModelChecksums(db.pool);
  indexes = await readModelIndexes();
}, 120_000);
afterAll(async () => {
  await store.close();
  await db.drop();
});

describe("the read models' checksums", () => {
  it("are the md5 of the rows' md5s in key order, as one string_agg statement gave them (checksums recorded before still compare)", async () => {
    // Now hashed in Node as the rows stream: joined in the server, the text passed
    // PostgreSQL's 1 GB limit at 33.5 million rows and the command failed.
    const streamed = await readModelChecksums(db.pool);
    const joined = await inTransaction(
      db.pool,
      async (tx) => {
        for (const setting of [`TIME ZONE 'UTC'`, `DateStyle = 'ISO, YMD'`, `IntervalStyle = 'postgres'`, 'extra_float_digits = 3'])
          await tx.query(`SET LOCAL ${setting}`);
        const out: TableChecksum[] = [];
        for (const { table } of streamed) {
          const { digest, from, order } = await rowDigests(tx, table);
          const r = await tx.query<{ rows: string; md5: string }>(
            `SELECT count(*) AS rows, md5(coalesce(string_agg(${digest}, '' ORDER BY ${order}), '')) AS md5 FROM ${from}`,
          );
          out.push({ table, rows: Number(r.rows[0]!.rows), md5: r.rows[0]!.md5 });
        }
        return out;
      },
      { isolation: 'REPEATABLE READ', readOnly: true },
    );
    expect(streamed).toEqual(joined);
    expect(streamed.filter((t) => t.rows > 1).length).toBeGreaterThan(5);
  });
});

describe('projections rebuilt in one pass over the log', () => {
  it('equal, table by table, what the live runners built on the same seeded random history', async () => {
    // Every table filled (open holds may all be released by the end of the history).
    expect(live.filter((t) => t.rows === 0 && t.table !== 'ledger_open_holds').map((t) => t.table)).toEqual([]);
    const batchSize = seededRandom('one-pass rebuild page size').int(50, 3_000);
    const logEvents = Number((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
    const result = await rebuildProjectionsTogether(db.pool, store, allProjections, { batchSize });
    expect({ batchSize, tables: await readModelChecksums(db.pool) }).toEqual({ batchSize, tables: live });
    expect(result.logEventsRead).toBe(logEvents);
    expect(result.projections.map((p) => p.projection)).toEqual(allProjections.map((p) => p.name));
    const streamCatalog = result.projections.find((p) => p.projection === 'stream_catalog')!;
    expect(streamCatalog.eventsApplied).toBe(BigInt(logEvents));
    // Every checkpoint at the head, no rebuild left marked as running, no lease left behind.
    const head = (await visibleHead(db.pool, store))!;
    for (const projection of allProjections) {
      const row = (await readCheckpoint(db.pool, projection.name))!;
      expect({ projection: projection.name, atHead: comparePositions(row.position, head) >= 0, rebuilding: row.rebuildStartedAt }).toEqual({
        projection: projection.name,
        atHead: true,
        rebuilding: null,
      });
    }
    expect((await db.pool.query('SELECT * FROM projection_leases')).rows).toEqual([]);
    // The secondary indexes dropped while the tables filled are all there again, as the migrations made them.
    expect(await readModelIndexes()).toEqual(indexes);
    expect(await deferredIndexes()).toEqual([]);
  });

  it('drops the secondary indexes of the emptied tables while it fills them, and keeps the primary keys the projections write through', async () => {
    // Seen from inside the pass: the first batch of stream_catalog looks before it applies (every
    // projection's indexes are made again only once the reader is done, so after this batch).
    let during: { indexes: string[]; deferred: unknown[]; autovacuum: { off: string[]; recorded: string[] } } | null = null;
    const analyzedBefore = await analyzeCounts();
    const looking: Projection = {
      ...streamCatalogProjection,
      // From its events, page by page (not computed in SQL), so that it looks from inside the pass.
      rebuildInDatabase: undefined,
      apply: async (tx, events, prepared) => {
        during ??= { indexes: (await readModelIndexes()).map((i) => i.indexname), deferred: await deferredIndexes(), autovacuum: await autovacuumPaused() };
        await streamCatalogProjection.apply(tx, events, prepared);
      },
    };
    await rebuildProjectionsTogether(
      db.pool,
      store,
      allProjections.map((p) => (p === streamCatalogProjection ? looking : p)),
      { batchSize: 500 },
    );
    // Every primary key stays but that of ledger_postings (Projection.primaryKeyBuiltAfterRebuild).
    const kept = indexes.filter((i) => i.indexname.endsWith('_pkey') && i.indexname !== 'ledger_postings_pkey').map((i) => i.indexname);
    const dropped = indexes.map((i) => i.indexname).filter((i) => !kept.includes(i));
    expect(dropped.length).toBeGreaterThan(10);
    expect(dropped).toContain('ledger_postings_pkey');
    expect(during).not.toBeNull();
    expect(during!.indexes).toEqual(kept);
    expect(during!.deferred).toHaveLength(dropped.length);
    expect(await readModelIndexes()).toEqual(indexes);
    expect(await deferredIndexes()).toEqual([]);
    // Autovacuum was off for every emptied table while it filled, and recorded; it is on
    // again at the end (reloptions as the migrations left them) and every table analyzed.
    const tables = allProjections.flatMap((p) => p.tables).sort();
    expect(during!.autovacuum).toEqual({ off: tables, recorded: tables });
    expect(await autovacuumPaused()).toEqual({ off: [], recorded: [] });
    const analyzedAfter = await analyzeCounts();
    expect(tables.filter((t) => !(analyzedAfter.get(t)! > (analyzedBefore.get(t) ?? 0)))).toEqual([]);
    expect(await readModelChecksums(db.pool)).toEqual(live);
  });

  /** Waits until the runner's checkpoint reaches the log's visible head. */
  async function caughtUp(runner: ProjectionRunner): Promise<void> {
    const head = (await visibleHead(db.pool, store))!;
    for (let i = 0; ; i++) {
      const checkpoint = runner.status().checkpoint;
      if (checkpoint && comparePositions(checkpoint, head) >= 0) return;
      if (i > 3_000) throw new Error(`the runner never caught up: ${JSON.stringify(runner.status())}`);
      await sleep(20);
    }
  }

  /** What a rebuild killed after its reset leaves of a projection (whose one table bears its name): emptied, secondary indexes dropped and autovacuum off, both recorded, checkpoint at zero. */
  async function leaveResetByRebuild(projection: string): Promise<void> {
    await inTransaction(db.pool, async (tx) => {
      await tx.query(`TRUNCATE ${projection}`);
      await deferSecondaryIndexes(tx, projection, [projection]);
      await deferAutovacuum(tx, projection, [projection]);
      await tx.query(
        `UPDATE projection_checkpoints SET commit_position = 0, prepare_position = 0, events_applied = 0, rebuild_started_at = now() WHERE projection = $1`,
        [projection],
      );
    });
  }

  it('a runner that takes over a projection whose rebuild stopped half-way makes its dropped indexes again first, and ends with the live read model', async () => {
    // What a rebuild killed after its reset leaves: tables emptied, secondary indexes dropped and recorded, checkpoint at zero.
    await leaveResetByRebuild('invoices');
    expect((await deferredIndexes()).map((r) => r.index_name).sort()).toEqual([
      'invoices_created',
      'invoices_list',
      'invoices_open_by_expiry',
      'invoices_order',
    ]);
    expect(await autovacuumPaused()).toEqual({ off: ['invoices'], recorded: ['invoices'] });
    const runner = new ProjectionRunner(db.pool, store, invoicesProjection, { batchSize: 300, standbyRetryMs: 50 });
    runner.start();
    try {
      await caughtUp(runner);
    } finally {
      await runner.stop();
    }
    expect(await readModelIndexes()).toEqual(indexes);
    expect(await deferredIndexes()).toEqual([]);
    // Autovacuum, switched off by the stopped rebuild, is on again.
    expect(await autovacuumPaused()).toEqual({ off: [], recorded: [] });
    expect(await readModelChecksums(db.pool)).toEqual(live);
  });

  it('resumed (resume: true) after a stop half-way, makes the dropped indexes again at the end of its pass and ends with the live read model', async () => {
    // Half-way: the first page applied and committed with its checkpoint, the indexes still dropped.
    await leaveResetByRebuild('payouts');
    const firstPage = await store.readAll({ after: 'start', maxCount: 1_000 });
    await applyBatchWithCheckpoint(db.pool, payoutsProjection, {
      from: { commit: 0n, prepare: 0n },
      to: firstPage[firstPage.length - 1]!.position,
      events: firstPage.filter((e) => matchesFilter(payoutsProjection.filter, e)),
    });
    expect((await deferredIndexes()).map((r) => r.index_name).sort()).toEqual(['payouts_list', 'payouts_requested', 'payouts_seq_key']);
    expect(await autovacuumPaused()).toEqual({ off: ['payouts'], recorded: ['payouts'] });
    await rebuildProjectionsTogether(db.pool, store, [payoutsProjection], { resume: true, batchSize: 700 });
    expect(await readModelIndexes()).toEqual(indexes);
    expect(await deferredIndexes()).toEqual([]);
    expect(await autovacuumPaused()).toEqual({ off: [], recorded: [] });
    expect(await readModelChecksums(db.pool)).toEqual(live);
  });

  it('resumed with projections at different checkpoints, hands each only the events past its own (a page that straddles one of them)', async () => {
    // refunds stopped right after its reset, payouts after a first batch that ends between two of its events:
    // the pass reads from zero, in pages of 700, so one page holds events payouts has applied and events it has not.
    await leaveResetByRebuild('payouts');
    await leaveResetByRebuild('refunds');
    const log = await store.readAll({ after: 'start', maxCount: 1_000_000 });
    const payoutIndexes = log.flatMap((e, i) => (matchesFilter(payoutsProjection.filter, e) ? [i] : []));
    // The first batch ends right after a payout near the middle, at a place that is not a page boundary
    // (with a random history, the middle payout itself can end a page of 700).
    const cut = payoutIndexes.slice(Math.floor(payoutIndexes.length / 2)).find((i) => (i + 1) % 700 !== 0)! + 1;
    expect(cut % 700).not.toBe(0);
    const firstPage = log.slice(0, cut);
    await applyBatchWithCheckpoint(db.pool, payoutsProjection, {
      from: { commit: 0n, prepare: 0n },
      to: firstPage[firstPage.length - 1]!.position,
      events: firstPage.filter((e) => matchesFilter(payoutsProjection.filter, e)),
    });
    const applied = firstPage.filter((e) => matchesFilter(payoutsProjection.filter, e)).length;
    const result = await rebuildProjectionsTogether(db.pool, store, [payoutsProjection, refundsProjection], { resume: true, batchSize: 700 });
    const payouts = result.projections.find((p) => p.projection === 'payouts')!;
    expect(applied).toBeGreaterThan(0);
    // Counted from the checkpoint: the events of the first batch are not applied again.
    expect(payouts.eventsApplied).toBe(BigInt(payoutIndexes.length));
    expect(await readModelIndexes()).toEqual(indexes);
    expect(await readModelChecksums(db.pool)).toEqual(live);
  });

  it('takes a projection over from an idle running runner, which stands by and takes it back after: no event needed, no read model left empty', async () => {
    const runner = new ProjectionRunner(db.pool, store, payoutsProjection, { batchSize: 100, standbyRetryMs: 50, leaseRenewMs: 200 });
    runner.start();
    try {
      for (let i = 0; runner.status().state !== 'live'; i++) {
        if (i > 1_000) throw new Error(`the runner never went live: ${JSON.stringify(runner.status())}`);
        await sleep(20);
      }
      // Nothing is appended meanwhile: the runner sees the request at its lease renewal.
      const states = new Set<string>();
      const watching = setInterval(() => states.add(runner.status().state), 10);
      const result = await rebuildProjectionsTogether(db.pool, store, [payoutsProjection, refundsProjection]);
      clearInterval(watching);
      expect(result.projections.map((p) => p.projection)).toEqual(['payouts', 'refunds']);
      expect(states).toContain('handed_over');
      expect(await readModelChecksums(db.pool)).toEqual(live);
      // Let go: the runner is the active instance again, from the rebuilt checkpoint.
      for (let i = 0; runner.status().state !== 'live'; i++) {
        if (i > 1_000) throw new Error(`the runner never took the projection back: ${JSON.stringify(runner.status())}`);
        await sleep(20);
      }
    } finally {
      await runner.stop();
    }
    expect(await readModelChecksums(db.pool)).toEqual(live);
  });

  it('a runner that does not hand over in time (a projector of another kind): ProjectionHeldError naming the holder, and nothing changed', async () => {
    // A session that holds the lock as a runner does, but never looks at hand-over requests.
    const holder = await db.pool.connect();
    try {
      await holder.query(`SELECT pg_advisory_lock(${PROJECTION_LOCK_NAMESPACE}, hashtext('payouts'))`);
      await holder.query(
        `INSERT INTO projection_leases (projection, holder, backend_pid, acquired_at, renewed_at)
         VALUES ('payouts', 'old-projector:4242', pg_backend_pid(), now(), now())
         ON CONFLICT (projection) DO UPDATE SET holder = EXCLUDED.holder, backend_pid = EXCLUDED.backend_pid`,
      );
      const before = await readCheckpoint(db.pool, 'payouts');
      await expect(rebuildProjectionsTogether(db.pool, store, [refundsProjection, payoutsProjection], { handoverWaitMs: 500 })).rejects.toThrow(
        ProjectionHeldError,
      );
      await expect(rebuildProjectionsTogether(db.pool, store, [payoutsProjection], { handoverWaitMs: 500 })).rejects.toThrow(/old-projector:4242/);
      expect(await readCheckpoint(db.pool, 'payouts')).toEqual(before);
      expect(await readModelChecksums(db.pool)).toEqual(live);
      // No request left behind, no lock of refunds kept.
      expect((await db.pool.query('SELECT count(*)::int AS n FROM projection_handovers')).rows[0].n).toBe(0);
      const refunds = await HeldProjectionLocks.takeOver(db.pool, ['refunds'], { waitMs: 500 });
      await refunds.release();
    } finally {
      await holder.query(`DELETE FROM projection_leases WHERE backend_pid = pg_backend_pid()`);
      await holder.query(`SELECT pg_advisory_unlock(${PROJECTION_LOCK_NAMESPACE}, hashtext('payouts'))`);
      holder.release();
    }
  });

  it('holds the runners’ own locks: a runner stands by (handed over) while a rebuild holds its projection, then follows from the checkpoint', async () => {
    const locks = await HeldProjectionLocks.takeOver(db.pool, ['payouts']);
    expect(locks.names).toEqual(['payouts']);
    await db.pool.query(`UPDATE projection_checkpoints SET commit_position = 0, prepare_position = 0, events_applied = 0 WHERE projection = 'payouts'`);
    await db.pool.query('TRUNCATE payouts');
    const runner = new ProjectionRunner(db.pool, store, payoutsProjection, { batchSize: 100, standbyRetryMs: 50 });
    runner.start();
    try {
      for (let i = 0; runner.status().state !== 'handed_over'; i++) {
        if (i > 1_000) throw new Error(`the runner never stood by: ${JSON.stringify(runner.status())}`);
        await sleep(20);
      }
      // A second taker finds the projection held, and takes nothing; the first one's request stays (handed over, not standby).
      await expect(HeldProjectionLocks.takeOver(db.pool, ['refunds', 'payouts'], { waitMs: 300 })).rejects.toThrow(ProjectionHeldError);
      expect((await readCheckpoint(db.pool, 'payouts'))!.eventsApplied).toBe(0n);
      await sleep(200);
      expect(runner.status().state).toBe('handed_over');
      await locks.release();
      await caughtUp(runner);
    } finally {
      await runner.stop();
    }
    expect(await readModelChecksums(db.pool)).toEqual(live);
  });
  /** The log's events that match one of the filters (none given: all). */
  const eventsMatching = async (...filters: AllFilter[]) =>
    (await store.readAll({ after: 'start', maxCount: 1_000_000 })).filter((e) => filters.length === 0 || matchesAnyFilter(filters, e)).length;

  it('reads only the events of a pass whose projections all have filters, and moves their checkpoints to the head it began with', async () => {
    // The log's last event is of a stream neither projection reads: their last page ends before the head.
    await store.appendToStream(`unread-${randomBytes(4).toString('hex')}`, [{ id: randomUUID(), type: 'Unread', data: {} }]);
    const head = (await visibleHead(db.pool, store))!;
    const result = await rebuildProjectionsTogether(db.pool, store, [payoutsProjection, refundsProjection], { batchSize: 400 });
    const wanted = await eventsMatching(payoutsProjection.filter!, refundsProjection.filter!);
    expect(wanted).toBeLessThan(await eventsMatching());
    expect(result.logEventsRead).toBe(wanted);
    for (const name of ['payouts', 'refunds']) {
      const row = (await readCheckpoint(db.pool, name))!;
      expect({ name, position: row.position, rebuilding: row.rebuildStartedAt }).toEqual({ name, position: head, rebuilding: null });
    }
    // The live read models, caught up with the new event (the stream catalog's row for it).
    for (const projection of allProjections) await projectToHead(db.pool, store, projection, 500);
    live = await readModelChecksums(db.pool);
    expect(await readModelIndexes()).toEqual(indexes);
  });

  it('computes the stream catalog in SQL when the log is in its database, from the events otherwise; the same rows every way', async () => {
    const logEvents = await eventsMatching();
    const catalogOf = (r: { projections: readonly { projection: string; eventsApplied: bigint }[] }) =>
      r.projections.find((p) => p.projection === 'stream_catalog')!.eventsApplied;
    // In SQL: not one event read into Node.
    const inSql = await rebuildProjectionsTogether(db.pool, store, [streamCatalogProjection]);
    expect({ read: inSql.logEventsRead, applied: catalogOf(inSql), tables: await readModelChecksums(db.pool) }).toEqual({
      read: 0,
      applied: BigInt(logEvents),
      tables: live,
    });
    expect((await readCheckpoint(db.pool, 'stream_catalog'))!.position).toEqual(await visibleHead(db.pool, store));
    expect(await readModelIndexes()).toEqual(indexes);
    // A store that does not keep the log in this database, and a rebuild asked for every read model from its events.
    const elsewhere = Object.assign(Object.create(store) as EventStore, { keepsLogIn: undefined });
    for (const [how, r] of [
      ['a store elsewhere', await rebuildProjectionsTogether(db.pool, elsewhere, [streamCatalogProjection], { batchSize: 900 })],
      ['computeInDatabase: false', await rebuildProjectionsTogether(db.pool, store, [streamCatalogProjection], { computeInDatabase: false })],
    ] as const) {
      expect({ how, read: r.logEventsRead, applied: catalogOf(r), tables: await readModelChecksums(db.pool) }).toEqual({
        how,
        read: logEvents,
        applied: BigInt(logEvents),
        tables: live,
      });
    }
    // Resumed from a checkpoint past zero: the rest from its events.
    await leaveResetByRebuild('stream_catalog');
    const firstPage = await store.readAll({ after: 'start', maxCount: 700 });
    await applyBatchWithCheckpoint(db.pool, streamCatalogProjection, { from: { commit: 0n, prepare: 0n }, to: firstPage[699]!.position, events: firstPage });
    const resumed = await rebuildProjectionsTogether(db.pool, store, [streamCatalogProjection], { resume: true, batchSize: 500 });
    expect({ read: resumed.logEventsRead, applied: catalogOf(resumed), tables: await readModelChecksums(db.pool) }).toEqual({
      read: logEvents - 700,
      // Counted since the reset: the first page's and the rest.
      applied: BigInt(logEvents),
      tables: live,
    });
    expect(await readModelIndexes()).toEqual(indexes);
    expect(await deferredIndexes()).toEqual([]);
  });

  it('hands a projection that reads no event data the events no other projection of its pass wants without their data, and the others theirs', async () => {
    const seen = { catalog: [] as RecordedEvent[], payouts: [] as RecordedEvent[] };
    const watching = (projection: Projection, into: RecordedEvent[]): Projection => ({
      ...projection,
      rebuildInDatabase: undefined,
      apply: async (tx, events, prepared) => {
        into.push(...events);
        await projection.apply(tx, events, prepared);
      },
    });
    await rebuildProjectionsTogether(db.pool, store, [watching(streamCatalogProjection, seen.catalog), watching(payoutsProjection, seen.payouts)], {
      batchSize: 800,
    });
    const log = await store.readAll({ after: 'start', maxCount: 1_000_000 });
    const payoutEvents = log.filter((e) => matchesFilter(payoutsProjection.filter, e));
    expect(seen.payouts).toEqual(payoutEvents);
    // The catalog: every event; with its data where payouts wants it, else {}.
    expect(seen.catalog).toEqual(log.map((e) => (matchesFilter(payoutsProjection.filter, e) ? e : { ...e, data: {} })));
    expect(log.filter((e) => !matchesFilter(payoutsProjection.filter, e) && Object.keys(e.data).length > 0).length).toBeGreaterThan(0);
    expect(await readModelChecksums(db.pool)).toEqual(live);
  });
});
