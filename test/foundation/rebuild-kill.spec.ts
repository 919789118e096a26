import { randomUUID } from 'node:crypto';
import { comparePositions, PostgresEventStore } from '#event-store';
import { readCheckpoint } from '#event-store/projections';
import { startProcess, PROJECTOR_PUBLIC_URL } from '../support/gateway-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { visibleHead } from '../support/project-to-head';
import { allProjections, readModelChecksums } from '#payments/read-models';
import { seededRandom } from '../support/test-seed';

const STREAMS = 300;
const EVENTS_PER_STREAM = 100;

describe('projections:rebuild killed mid-way', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    for (let s = 0; s < STREAMS; s++) {
      await store.appendToStream(
        `account-${s}`,
        Array.from({ length: EVENTS_PER_STREAM }, (_, i) => ({ id: randomUUID(), type: `Posted${i % 7}`, data: { s, i } })),
      );
    }
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  const checksum = async () =>
    (
      await db.pool.query<{ sum: string; n: number }>(
        `SELECT md5(coalesce(string_agg(c::text, '|' ORDER BY c.stream_name), '')) AS sum, count(*)::int AS n FROM stream_catalog c`,
      )
    ).rows[0]!;

  it('ends, after a restart of the projector, with the same read model as an uninterrupted rebuild', async () => {
    const env = { DATABASE_URL: db.url };
    const total = STREAMS * EVENTS_PER_STREAM;

    // 1. Start a rebuild from the events (not computed in SQL) with small batches and SIGKILL it part-way. On a loaded
    // machine this poll may not run before the rebuild ends: then it is started again (it rebuilds from zero).
    let interrupted = startProcess('rebuild', env, ['stream_catalog', '--batch-size', '25', '--from-events']);
    let appliedAtKill = 0n;
    for (let attempt = 1; ;) {
      const row = await readCheckpoint(db.pool, 'stream_catalog');
      if (row && row.rebuildStartedAt && row.eventsApplied >= BigInt(total / 10)) {
        interrupted.child.kill('SIGKILL');
        appliedAtKill = row.eventsApplied;
        break;
      }
      if (typeof (await Promise.race([interrupted.exited, new Promise((r) => setTimeout(r, 5))])) !== 'undefined') {
        if (++attempt > 3) throw new Error(`the rebuild ended before the kill three times:\n${interrupted.output()}`);
        interrupted = startProcess('rebuild', env, ['stream_catalog', '--batch-size', '25', '--from-events']);
      }
    }
    expect(await interrupted.exited).toBe('SIGKILL');
    const atKill = await readCheckpoint(db.pool, 'stream_catalog');
    expect(atKill!.eventsApplied).toBeLessThan(BigInt(total));
    expect(atKill!.eventsApplied).toBeGreaterThanOrEqual(appliedAtKill);

    // 2. Start the projector: it resumes from the last committed batch.
    const projector = startProcess('projector', { ...env, PUBLIC_URL: PROJECTOR_PUBLIC_URL });
    const head = (await visibleHead(db.pool, store))!;
    const deadline = Date.now() + 60_000;
    for (;;) {
      const row = await readCheckpoint(db.pool, 'stream_catalog');
      if (row && comparePositions(row.position, head) >= 0) break;
      if (Date.now() > deadline) throw new Error(`projector did not finish; output:\n${projector.output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await projector.kill();
    const resumed = await checksum();
    const resumedCheckpoint = await readCheckpoint(db.pool, 'stream_catalog');
    expect(resumedCheckpoint!.eventsApplied).toBe(BigInt(total));
    expect(resumed.n).toBe(STREAMS);

    // 3. An uninterrupted rebuild gives the same table: the catalog computed in SQL from the log's table (decision 0095).
    const clean = startProcess('rebuild', env, ['stream_catalog']);
    expect(await clean.exited).toBe(0);
    expect(clean.output()).toContain(`rebuilt stream_catalog: ${total} events`);
    // Not one event read into the process.
    expect(clean.output()).toMatch(/read the log once: 0 events in [\d.]+ s/);
    expect(await checksum()).toEqual(resumed);
    // Beyond the projector's own deadline (60 s), so that its output is what a failure shows.
  }, 120_000);

  it('refuses an unknown projection name', async () => {
    const proc = startProcess('rebuild', { DATABASE_URL: db.url }, ['no_such_projection']);
    expect(await proc.exited).toBe(2);
    expect(proc.output()).toContain('unknown projection no_such_projection; known: stream_catalog');
  });
});

// Small pages (the upserts) and pages large enough for the rebuild's COPY of new rows (decision 0095).
describe.each([
  ['pages of 20 events', '20'],
  ['pages of 1,500 events (COPY of new rows)', '1500'],
])('projections:rebuild of every read model (passes at once, a thread each) killed mid-way, %s', (_pages, batchSize) => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  /** Every read model's checkpoint at the head of the log. */
  async function caughtUp(): Promise<boolean> {
    const head = (await visibleHead(db.pool, store))!;
    for (const projection of allProjections) {
      const row = await readCheckpoint(db.pool, projection.name);
      if (!row || comparePositions(row.position, head) < 0) return false;
    }
    return true;
  }

  /** Every index of the read models' tables, with its definition. */
  const readModelIndexes = async () =>
    (
      await db.pool.query<{ indexname: string; indexdef: string }>(
        `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = ANY($1::text[]) ORDER BY indexname`,
        [allProjections.flatMap((p) => p.tables)],
      )
    ).rows;
  const deferredIndexes = async () => (await db.pool.query<{ index_name: string }>('SELECT index_name FROM projection_deferred_indexes')).rows;
  /** The read models' tables with autovacuum off, as reloptions say and as recorded by a rebuild. */
  const autovacuumOff = async () => ({
    off: (
      await db.pool.query<{ t: string }>(
        `SELECT relname AS t FROM pg_class WHERE relname = ANY($1::text[]) AND 'autovacuum_enabled=false' = ANY(coalesce(reloptions, '{}')) ORDER BY 1`,
        [allProjections.flatMap((p) => p.tables)],
      )
    ).rows.map((r) => r.t),
    recorded: (await db.pool.query<{ t: string }>('SELECT table_name AS t FROM projection_deferred_autovacuum ORDER BY 1')).rows.map((r) => r.t),
  });

  it('ends, after a projector resumed it, with the checksums and the indexes of an uninterrupted rebuild (seeded history, random moment of the kill)', async () => {
    const env = { DATABASE_URL: db.url };
    const indexes = await readModelIndexes();
    const rng = seededRandom('one-pass rebuild killed');
    const seed = startProcess('seed-load', env, ['--events', '6000', '--seed', String(rng.int(0, 1_000_000))]);
    expect(await seed.exited).toBe(0);
    const logEvents = Number((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
    const invoiceEvents = Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE stream_name LIKE 'invoice-%'`)).rows[0]!.n);
    // Before the last page: the rebuild must still have a page to go when it is killed.
    const killAt = BigInt(Math.floor((invoiceEvents - Number(batchSize)) * rng.between(0.05, 0.8)));

    // 1. Rebuild every read model in pages of `batchSize` events and SIGKILL it once invoices (a pass on a thread of its own) has applied `killAt` events.
    const interrupted = startProcess('rebuild', env, ['--batch-size', batchSize]);
    for (;;) {
      const row = await readCheckpoint(db.pool, 'invoices');
      if (row && row.rebuildStartedAt && row.eventsApplied >= killAt) {
        interrupted.child.kill('SIGKILL');
        break;
      }
      if (typeof (await Promise.race([interrupted.exited, new Promise((r) => setTimeout(r, 5))])) !== 'undefined') {
        throw new Error(`the rebuild ended before the kill (at ${killAt} of ${invoiceEvents} invoice events):\n${interrupted.output()}`);
      }
    }
    expect(await interrupted.exited).toBe('SIGKILL');
    const atKill = await Promise.all(allProjections.map((p) => readCheckpoint(db.pool, p.name)));
    expect(atKill.find((row) => row!.projection === 'invoices')!.eventsApplied).toBeLessThan(BigInt(invoiceEvents));
    // Every read model was reset before either pass began; the other pass may have ended
    // before the kill (its read models at the head, their indexes made again). Those not
    // at the head are still marked as rebuilding,
    const head = (await visibleHead(db.pool, store))!;
    const unfinished = allProjections.filter((p) => comparePositions(atKill.find((row) => row!.projection === p.name)!.position, head) < 0);
    expect(unfinished.map((p) => p.name)).toContain('invoices');
    expect(atKill.every((row) => row !== null)).toBe(true);
    expect(atKill.filter((row) => unfinished.some((p) => p.name === row!.projection) && row!.rebuildStartedAt === null)).toEqual([]);
    // their secondary indexes still dropped, and recorded,
    expect((await readModelIndexes()).length).toBeLessThan(indexes.length);
    expect((await deferredIndexes()).length).toBe(indexes.length - (await readModelIndexes()).length);
    // and autovacuum off for their emptied tables, and recorded.
    const paused = await autovacuumOff();
    expect(paused.off).toEqual(paused.recorded);
    expect(unfinished.flatMap((p) => p.tables).filter((t) => !paused.off.includes(t))).toEqual([]);

    // 2. The projector resumes each read model from its last committed batch.
    const projector = startProcess('projector', { ...env, PUBLIC_URL: PROJECTOR_PUBLIC_URL });
    const deadline = Date.now() + 90_000;
    while (!(await caughtUp())) {
      if (Date.now() > deadline) throw new Error(`the projector did not catch up; output:\n${projector.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await projector.kill()).toBe(0);
    expect(await readModelIndexes()).toEqual(indexes);
    expect(await deferredIndexes()).toEqual([]);
    expect(await autovacuumOff()).toEqual({ off: [], recorded: [] });
    const resumed = await readModelChecksums(db.pool);
    expect((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n).toBe(String(logEvents));

    // 3. An uninterrupted rebuild gives the same read models.
    const clean = startProcess('rebuild', env);
    expect(await clean.exited).toBe(0);
    expect(clean.output()).toContain(`rebuilt stream_catalog: ${logEvents} events`);
    expect(clean.output()).toMatch(/read the log in 2 passes at once, one thread each: \d+ events read in [\d.]+ s; peak RSS \d+ MiB/);
    expect(clean.output()).toMatch(/pass 1 \(ledger, stream_catalog\): read \d+ events/);
    expect(clean.output()).toMatch(/pass 2 \(invoices, refunds, payouts\): read \d+ events/);
    expect(await readModelChecksums(db.pool)).toEqual(resumed);
    expect(await readModelIndexes()).toEqual(indexes);
    expect(await deferredIndexes()).toEqual([]);
    expect(await autovacuumOff()).toEqual({ off: [], recorded: [] });
  }, 180_000);
});
