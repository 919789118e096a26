/**
 * The stream catalog, whatever the batches and however it is built (decision 0095).
 *
 * - Event by event (`apply`), the rows must not depend on how the events were cut into
 *   batches: a stream's first and last event times are its earliest and latest. (An
 *   event's time is its append transaction's start, so it need not rise with the
 *   revision; before, the catalog kept the time of the first event of the batch that
 *   began the stream, and one batch or three gave different rows.)
 * - In the database (`rebuildInDatabase`, one SQL statement over the log's table up to a
 *   head) it must give the rows `apply` gives, on a seeded history, up to any head, and
 *   for stream names with no category.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Position, PostgresEventStore, RecordedEvent, streamSummariesThrough } from '#event-store';
import { inTransaction } from '#platform/database';
import { loadConfig } from '#payments/composition';
import { readModelChecksums, STREAM_CATALOG_COPY_MIN_ROWS, streamCatalogProjection, TableChecksum } from '#payments/read-models';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { seedLoad } from '../../apps/tools/src/seed/seed-load';
import { visibleHead, wholeLog } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { seededRandom } from '../support/test-seed';

let db: TestDatabase;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase();
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  const rng = seededRandom('stream catalog rebuilt in the database');
  await seedLoad(
    { pool: db.pool, store, terms: loadConfig({}), secrets: new SecretBox(fixedKeys([randomBytes(32)])) },
    { events: 2_000, seed: String(rng.int(0, 1_000_000_000)), days: rng.int(3, 8) },
  );
}, 120_000);
afterAll(async () => {
  await store.close();
  await db.drop();
});

const catalog = async () =>
  (
    await db.pool.query<Record<string, unknown>>(
      `SELECT stream_name, category, event_count::int, last_revision::int, last_event_type, first_event_at, last_event_at FROM stream_catalog ORDER BY stream_name`,
    )
  ).rows;
const catalogChecksum = async (): Promise<TableChecksum> => (await readModelChecksums(db.pool)).find((t) => t.table === 'stream_catalog')!;
const emptyCatalog = () => db.pool.query('TRUNCATE stream_catalog');
const applyBatch = (events: readonly RecordedEvent[]) => inTransaction(db.pool, (tx) => streamCatalogProjection.apply(tx, events, undefined));
const rebuildInDatabase = (upTo: Position) => inTransaction(db.pool, (tx) => streamCatalogProjection.rebuildInDatabase!(tx, upTo));

/** An event of `stream` at `revision`, appended at `at` (a crafted event: only what the catalog reads). */
function eventOf(stream: string, revision: number, at: string, position: bigint): RecordedEvent {
  return {
    id: randomUUID(),
    type: `Step${revision}`,
    streamName: stream,
    revision: BigInt(revision),
    data: {},
    metadata: {},
    position: { commit: 1n, prepare: position },
    createdAt: new Date(at),
  };
}

describe('the stream catalog, event by event', () => {
  afterAll(emptyCatalog);

  // Times that do not rise with the revisions: an append's time is its transaction's start.
  const times = ['2026-03-01T10:00:05.000Z', '2026-03-01T10:00:03.000Z', '2026-03-01T10:00:04.000Z'];

  it.each([
    ['a few streams (the upsert)', 3],
    ['enough streams begun in one batch for the COPY', STREAM_CATALOG_COPY_MIN_ROWS + 5],
  ])('gives the same rows in one batch as in a batch per event, its times the earliest and the latest: %s', async (_how, streams) => {
    const events = Array.from({ length: streams }, (_, s) => times.map((at, r) => eventOf(`catalogtimes_${streams}-${s}`, r, at, BigInt(s * 3 + r)))).flat();
    await emptyCatalog();
    await applyBatch(events);
    const oneBatch = await catalog();
    await emptyCatalog();
    for (const event of events) await applyBatch([event]);
    const perEvent = await catalog();
    expect(oneBatch).toEqual(perEvent);
    expect(oneBatch).toHaveLength(streams);
    expect(oneBatch[0]).toEqual({
      stream_name: `catalogtimes_${streams}-0`,
      category: `catalogtimes_${streams}`,
      event_count: 3,
      last_revision: 2,
      last_event_type: 'Step2',
      first_event_at: new Date(times[1]!),
      last_event_at: new Date(times[0]!),
    });
  });
});

describe('the stream catalog rebuilt in the database', () => {
  it('gives the rows apply gives for the same events, up to the head and up to a head in the middle of the log', async () => {
    // The head once every event written is visible (another test file's open transaction
    // can hide them for a moment: the test databases share one cluster), then the log up to it.
    const head = (await visibleHead(db.pool, store))!;
    const log = await wholeLog(store, 1000);
    expect(log[log.length - 1]!.position).toEqual(head);
    const rng = seededRandom('catalog in the database, a head in the middle');
    for (const upTo of [log.length - 1, rng.int(1, log.length - 2)]) {
      await emptyCatalog();
      // Event by event in pages of a random size.
      const through = log.slice(0, upTo + 1);
      const page = rng.int(50, 700);
      for (let i = 0; i < through.length; i += page) await applyBatch(through.slice(i, i + page));
      const byEvents = { checksum: await catalogChecksum(), rows: await catalog() };
      await emptyCatalog();
      expect(await rebuildInDatabase(log[upTo]!.position)).toBe(upTo + 1);
      expect({ upTo, checksum: await catalogChecksum(), rows: await catalog() }).toEqual({ upTo, ...byEvents });
    }
  });

  it("finds a stream's last event type by one lookup, holding no array of the stream's events", async () => {
    // An array_agg of the stream's types grew with the stream: one ledger stream of about
    // 45 million events passes PostgreSQL's 1 GB limit and the rebuild fails.
    const head = (await visibleHead(db.pool, store))!;
    const plan = await db.pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN VERBOSE ${streamSummariesThrough(head)}`);
    const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(text).toMatch(/events_stream_revision_unique/);
    expect(text).not.toMatch(/array_agg/);
  });

  it('takes the category as streamCategory does: none for a name without one', async () => {
    const names = [
      `nodash${randomUUID().slice(0, 8)}`,
      `Upper-${randomUUID()}`,
      `two_part-x-${randomUUID()}`,
      `9digit-${randomUUID()}`,
      `lines-${randomUUID()}\nsecond`,
    ];
    for (const name of names) await store.appendToStream(name, [{ id: randomUUID(), type: 'Odd', data: {} }]);
    const head = (await visibleHead(db.pool, store))!;
    await emptyCatalog();
    await applyBatch((await wholeLog(store, 1000)).filter((e) => names.includes(e.streamName)));
    const byEvents = (await catalog()).filter((r) => names.includes(r.stream_name as string));
    await emptyCatalog();
    await rebuildInDatabase(head);
    const inDatabase = (await catalog()).filter((r) => names.includes(r.stream_name as string));
    expect(inDatabase).toEqual(byEvents);
    expect(inDatabase.map((r) => r.category).sort()).toEqual([names[0], names[1], 'two_part', names[3], names[4]].sort());
  });
});
