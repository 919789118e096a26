/**
 * The one-pass rebuild reads the log by binary COPY (readAllThrough, readLogByCopy):
 * statements of a bounded number of events, each with its own snapshot and horizon of
 * visibility, up to the head taken when the rebuild began. What it reads must be
 * exactly what readAll's pages give (event by event, every field), whatever the splits
 * between statements; an append still in flight is never read (nor skipped later);
 * events committed while a rebuild runs are neither skipped nor applied twice; a
 * rebuild stopped in the middle of the read and resumed ends with the live read models;
 * and a store without readAllThrough still rebuilds by pages. (The rows a rebuild
 * writes by COPY: test/projections/copy-binary.spec.ts.)
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { EventStore, LogReadScope, matchesAnyFilter, Position, PostgresEventStore, readLogByCopy, RecordedEvent } from '#event-store';
import { Projection, readCheckpoint, rebuildProjectionsTogether } from '#event-store/projections';
import { loadConfig } from '#payments/composition';
import {
  allProjections,
  invoicesProjection,
  ledgerProjection,
  payoutsProjection,
  readModelChecksums,
  refundsProjection,
  streamCatalogProjection,
  TableChecksum,
} from '#payments/read-models';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { seedLoad } from '../../apps/tools/src/seed/seed-load';
import { projectToHead, visibleHead, wholeLog } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { seededRandom } from '../support/test-seed';

let db: TestDatabase;
let store: PostgresEventStore;
let live: TableChecksum[];

/** The whole visible log by readAll pages of 700. */
const logByPages = () => wholeLog(store);

async function byCopy(range: { after: Position | 'start'; upTo: Position }, statementEvents?: number): Promise<RecordedEvent[]> {
  const events: RecordedEvent[] = [];
  const n = await readLogByCopy(db.pool, range, (e) => void events.push(e), statementEvents);
  expect(n).toBe(events.length);
  return events;
}

const appendPing = (streamName: string) => store.appendToStream(streamName, [{ id: randomUUID(), type: 'Ping', data: { at: 1 } }]);

beforeAll(async () => {
  // A test holds the cluster's horizon: on a server of its own (test/support/test-database.ts says why).
  db = await createTestDatabase({ serverOfItsOwn: true });
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  const rng = seededRandom('rebuild reads by COPY');
  await seedLoad(
    { pool: db.pool, store, terms: loadConfig({}), secrets: new SecretBox(fixedKeys([randomBytes(32)])) },
    { events: 3_000, seed: String(rng.int(0, 1_000_000_000)), days: rng.int(5, 10) },
  );
  for (const projection of allProjections) await projectToHead(db.pool, store, projection, rng.int(1, 500));
  live = await readModelChecksums(db.pool);
}, 120_000);
afterAll(async () => {
  await store.close();
  await db.drop();
});

describe('the log read by binary COPY', () => {
  it('gives every event as readAll does, whatever the split between statements, from any position up to any bound', async () => {
    const pages = await logByPages();
    const head = (await visibleHead(db.pool, store))!;
    expect(pages[pages.length - 1]!.position).toEqual(head);
    // One statement, several (a split that falls on the last event too), one event each at the start.
    expect(await byCopy({ after: 'start', upTo: head })).toEqual(pages);
    expect(await byCopy({ after: 'start', upTo: head }, 97)).toEqual(pages);
    expect(await byCopy({ after: 'start', upTo: head }, pages.length)).toEqual(pages);
    const rng = seededRandom('log by COPY ranges');
    for (let k = 0; k < 3; k++) {
      const from = rng.int(0, pages.length - 2);
      const to = rng.int(from + 1, pages.length - 1);
      const statement = rng.int(1, 400);
      expect({ from, to, statement, events: await byCopy({ after: pages[from]!.position, upTo: pages[to]!.position }, statement) }).toEqual({
        from,
        to,
        statement,
        events: pages.slice(from + 1, to + 1),
      });
    }
    // Nothing after the bound, nothing from the bound itself.
    expect(await byCopy({ after: head, upTo: head })).toEqual([]);
  });

  it('never reads an append committed after a transaction that could still append began, and reads it once that one ends', async () => {
    const before = (await visibleHead(db.pool, store))!;
    const far: Position = { commit: 1n << 60n, prepare: 1n << 60n };
    const open = await db.pool.connect();
    try {
      // A transaction that could still append (it holds a transaction id), and an append committed after it began.
      await open.query('BEGIN');
      await open.query('SELECT pg_current_xact_id()');
      const later = `copyread-${randomUUID()}`;
      await appendPing(later);
      const read = await byCopy({ after: before, upTo: far }, 5);
      expect(read.map((e) => e.streamName)).toEqual([]);
      await open.query('ROLLBACK');
      // Once nothing precedes it, the later append is read, once.
      await visibleHead(db.pool, store);
      expect((await byCopy({ after: before, upTo: far }, 5)).map((e) => e.streamName)).toEqual([later]);
    } finally {
      open.release();
    }
    // The log as the other tests know it: every read model again at the head.
    for (const projection of allProjections) await projectToHead(db.pool, store, projection, 500);
    live = await readModelChecksums(db.pool);
  });
});

describe('a part of the log read by binary COPY (a scope)', () => {
  it('gives only the events the scope asks for, and the data only of those it asks it for, as readAll and the filters give them', async () => {
    // A stream whose name holds a quote and a backslash: a prefix is a literal of the statement, matched as text.
    const odd = `quote'd\\-${randomUUID()}`;
    await appendPing(odd);
    await visibleHead(db.pool, store);
    const log = await logByPages();
    const head = log[log.length - 1]!.position;
    const scopes: LogReadScope[] = [
      { matching: [invoicesProjection.filter!, payoutsProjection.filter!] },
      // A filter of stream and type prefixes both.
      { matching: [refundsProjection.filter!] },
      { withDataOf: [ledgerProjection.filter!] },
      { matching: [{ streamNamePrefixes: ['invoice-'] }, { eventTypePrefixes: ['Payout'] }], withDataOf: [{ eventTypePrefixes: ['InvoiceCreated'] }] },
      { matching: [{ streamNamePrefixes: ["quote'd\\-"] }] },
      // Nothing, and everything.
      { matching: [] },
      { matching: [{ streamNamePrefixes: [] }] },
      { matching: [{}], withDataOf: [] },
    ];
    const counts: number[] = [];
    for (const [i, scope] of scopes.entries()) {
      const expected = log.filter((e) => matchesAnyFilter(scope.matching, e)).map((e) => (matchesAnyFilter(scope.withDataOf, e) ? e : { ...e, data: {} }));
      const read: RecordedEvent[] = [];
      const n = await readLogByCopy(db.pool, { after: 'start', upTo: head }, (e) => void read.push(e), 97, scope);
      expect({ i, n, read }).toEqual({ i, n: expected.length, read: expected });
      counts.push(n);
    }
    // None of the scopes is vacuous: some events in, some out.
    expect(counts[0]).toBeGreaterThan(0);
    expect(counts[0]).toBeLessThan(log.length);
    expect(counts[1]).toBeGreaterThan(0);
    expect(counts[4]).toBe(1);
    expect(counts.slice(5)).toEqual([0, 0, log.length]);
    expect(log.filter((e) => !matchesAnyFilter(scopes[2]!.withDataOf, e) && Object.keys(e.data).length > 0).length).toBeGreaterThan(0);
    // The store's readAllThrough reads with the scope it is given.
    const through: RecordedEvent[] = [];
    await store.readAllThrough({ after: 'start', upTo: head }, (e) => void through.push(e), scopes[0]);
    expect(through).toEqual(log.filter((e) => matchesAnyFilter(scopes[0]!.matching, e)));
    for (const projection of allProjections) await projectToHead(db.pool, store, projection, 500);
    live = await readModelChecksums(db.pool);
  });
});

describe('a rebuild reading the log by COPY', () => {
  it('applies the events committed while it runs neither twice nor never: the rebuild ends at its head, a runner follows from there', async () => {
    const appended: string[] = [];
    // The stream catalog appends new streams while its batches go (before each of its first three transactions).
    const appending: Projection = {
      ...streamCatalogProjection,
      // From its events, page by page (not computed in SQL), so that its batches append.
      rebuildInDatabase: undefined,
      prepare: async (events) => {
        if (appended.length < 3) {
          const name = `copyread-${randomUUID()}`;
          await appendPing(name);
          appended.push(name);
        }
        return streamCatalogProjection.prepare?.(events);
      },
    };
    await visibleHead(db.pool, store);
    const logBefore = Number((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
    const result = await rebuildProjectionsTogether(
      db.pool,
      store,
      allProjections.map((p) => (p === streamCatalogProjection ? appending : p)),
      { batchSize: 200 },
    );
    expect(appended).toHaveLength(3);
    // The rebuild read the log up to the head it began with, once.
    expect(result.logEventsRead).toBe(logBefore);
    expect((await readCheckpoint(db.pool, 'stream_catalog'))!.eventsApplied).toBe(BigInt(logBefore));
    // A runner takes the rest from the checkpoint: every event applied once, every stream in the catalog.
    await projectToHead(db.pool, store, streamCatalogProjection, 100);
    expect((await readCheckpoint(db.pool, 'stream_catalog'))!.eventsApplied).toBe(BigInt(logBefore + 3));
    const catalog = await db.pool.query<{ stream_name: string; event_count: string }>(
      'SELECT stream_name, event_count FROM stream_catalog WHERE stream_name = ANY($1::text[]) ORDER BY stream_name',
      [appended],
    );
    expect(catalog.rows).toEqual([...appended].sort().map((stream_name) => ({ stream_name, event_count: '1' })));
    live = await readModelChecksums(db.pool);
  });

  it('stopped in the middle of its read (a batch that fails for good) and resumed, ends with the live read models, its COPY ended', async () => {
    let batches = 0;
    const failing: Projection = {
      ...invoicesProjection,
      apply: async (tx, events) => {
        if (++batches === 4) throw Object.assign(new Error('a batch that cannot go on'), { code: '42000' });
        await invoicesProjection.apply(tx, events);
      },
    };
    await expect(
      rebuildProjectionsTogether(
        db.pool,
        store,
        allProjections.map((p) => (p === invoicesProjection ? failing : p)),
        { batchSize: 150 },
      ),
    ).rejects.toThrow('a batch that cannot go on');
    // Stopped with most of the log unread: no COPY of it left running on the server.
    const copies = async () =>
      (
        await db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'COPY (SELECT global_position%' AND pid <> pg_backend_pid()`,
        )
      ).rows[0]!.n;
    for (let i = 0; (await copies()) > 0; i++) {
      if (i > 250) throw new Error('the COPY of the stopped rebuild is still running');
      await new Promise((r) => setTimeout(r, 20));
    }
    const stoppedAt = (await readCheckpoint(db.pool, 'invoices'))!.position;
    expect(stoppedAt.prepare).toBeGreaterThan(0n);
    await rebuildProjectionsTogether(db.pool, store, allProjections, { resume: true, batchSize: 150 });
    expect(await readModelChecksums(db.pool)).toEqual(live);
  });

  it('by pages (readAll) when the store has no one-statement read, with the same read models', async () => {
    const paged = Object.assign(Object.create(store) as EventStore, { readAllThrough: undefined });
    expect(paged.readAllThrough).toBeUndefined();
    await visibleHead(db.pool, store);
    const result = await rebuildProjectionsTogether(db.pool, paged, allProjections, { batchSize: 333 });
    expect(result.logEventsRead).toBe(Number((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n));
    expect(await readModelChecksums(db.pool)).toEqual(live);
    // And by COPY again, with the same result.
    await rebuildProjectionsTogether(db.pool, store, allProjections, { batchSize: 333 });
    expect(await readModelChecksums(db.pool)).toEqual(live);
  });
});
