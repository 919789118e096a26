/**
 * What ledger:verify takes from the log verification on PostgreSQL (decision 0123):
 * verifyEventLog bounded by a position (`upTo`: events appended after it are neither
 * verified nor handed on) and handing on, page by page in log order, the events of one
 * type in streams named with a prefix (`forward`) with their data's jsonb text; and
 * repeatedDataFields, which finds values of data fields carried more than once, within a
 * stream or across streams, up to a position.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { ForwardedEvent, PostgresEventStore, Position, repeatedDataFields, textAt, TextColumnBuilder, verifyEventLog } from '#event-store';
import { visibleHead } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;
let store: PostgresEventStore;

beforeEach(async () => {
  db = await createTestDatabase();
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
});
afterEach(async () => {
  await store.close();
  await db.drop();
});

const entry = (cause: string, entryId: string, extra: Record<string, unknown> = {}) => ({
  id: randomUUID(),
  type: 'Posted',
  data: { cause, entryId, ...extra },
});

async function head(): Promise<Position> {
  await visibleHead(db.pool, store);
  return (await store.headPosition())!;
}

describe('verifyEventLog up to a position, handing events on', () => {
  it('verifies and hands on only the events up to the position, in log order, with their data as stored', async () => {
    await store.appendToStream('book-1', [entry('a', 'e1', { amount: 10 }), entry('b', 'e2')]);
    await store.appendToStream('other-1', [entry('a', 'e1')]);
    await store.appendToStream('book-2', [{ id: randomUUID(), type: 'Opened', data: { cause: 'x' } }, entry('c', 'e3', { note: 'ünïcode' })]);
    await store.appendToStream('book-1', [entry('d', 'e4')]);
    const upTo = await head();
    await store.appendToStream('book-1', [entry('late', 'e5')]);
    await store.appendToStream('book-3', [entry('late', 'e6')]);
    await head();

    const pages: ForwardedEvent[][] = [];
    const report = await verifyEventLog(db.pool, {
      upTo,
      pageSize: 2,
      forward: { streamNamePrefix: 'book-', eventType: 'Posted', onEvents: (events) => void pages.push(events) },
    });
    expect(report.problems).toEqual([]);
    expect(report.events).toBe(6);
    expect(report.head.position).toBe(`${upTo.commit}/${upTo.prepare}`);

    const stored = (
      await db.pool.query<{ stream_name: string; stream_revision: string; commit: string; prepare: string; data: string }>(
        `SELECT stream_name, stream_revision, transaction_id::text AS commit, global_position::text AS prepare, data::text AS data FROM events
         WHERE stream_name LIKE 'book-%' AND event_type = 'Posted' AND (transaction_id, global_position) <= ($1::text::xid8, $2::bigint)
         ORDER BY transaction_id, global_position`,
        [upTo.commit.toString(), upTo.prepare.toString()],
      )
    ).rows;
    expect(pages.flat()).toEqual(
      stored.map((r) => ({ streamName: r.stream_name, revision: BigInt(r.stream_revision), commit: r.commit, prepare: r.prepare, dataJson: r.data })),
    );
    expect(pages.flat().map((e) => `${e.streamName}@${e.revision}`)).toEqual(['book-1@0', 'book-1@1', 'book-2@1', 'book-1@2']);
    // A page of the log without such an event hands nothing on; each page at most what it read.
    expect(pages.every((page) => page.length > 0 && page.length <= 2)).toBe(true);
    expect(JSON.parse(pages.flat()[2]!.dataJson)).toEqual({ cause: 'c', entryId: 'e3', note: 'ünïcode' });

    // Unbounded, the later events are verified too.
    expect((await verifyEventLog(db.pool)).events).toBe(8);
  });

  it('keeps positions beyond 2^53 exact (pages carry them as numbers only while numbers hold them)', async () => {
    await db.pool.query('ALTER TABLE events ALTER COLUMN global_position RESTART WITH 9007199254740993');
    await store.appendToStream('book-1', [entry('a', 'e1'), entry('b', 'e2')]);
    await store.appendToStream('other-1', [entry('a', 'e1')]);
    await store.appendToStream('book-1', [{ id: randomUUID(), type: 'Posted', data: { cause: 'c', entryId: 'e3' } }]);
    const upTo = await head();
    const stored = (
      await db.pool.query<{ commit: string; prepare: string }>(
        `SELECT transaction_id::text AS commit, global_position::text AS prepare FROM events WHERE stream_name = 'book-1' ORDER BY stream_revision`,
      )
    ).rows;
    expect(stored.map((r) => r.prepare)).toEqual(['9007199254740993', '9007199254740994', '9007199254740996']);

    const forwarded: ForwardedEvent[] = [];
    const report = await verifyEventLog(db.pool, {
      upTo,
      pageSize: 3,
      at: [`${stored[1]!.commit}/${stored[1]!.prepare}`],
      forward: { streamNamePrefix: 'book-', eventType: 'Posted', onEvents: (events) => void forwarded.push(...events) },
    });
    expect(report.problems).toEqual([]);
    expect(report.head.position).toBe(`${upTo.commit}/${upTo.prepare}`);
    expect(report.head.position.endsWith('/9007199254740996')).toBe(true);
    expect([...report.at.keys()]).toEqual([`${stored[1]!.commit}/9007199254740994`]);
    expect(forwarded.map((e) => [e.commit, e.prepare])).toEqual(stored.map((r) => [r.commit, r.prepare]));
  });

  it('waits for each page to be taken before it hands on the next', async () => {
    for (let i = 0; i < 5; i++) await store.appendToStream(`book-${i}`, [entry(`c${i}`, `e${i}`)]);
    const upTo = await head();
    const taken: string[] = [];
    let inHand = 0;
    await verifyEventLog(db.pool, {
      upTo,
      pageSize: 1,
      forward: {
        streamNamePrefix: 'book-',
        eventType: 'Posted',
        onEvents: async (events) => {
          inHand += 1;
          expect(inHand).toBe(1);
          await new Promise((resolve) => setTimeout(resolve, 5));
          taken.push(...events.map((e) => e.streamName));
          inHand -= 1;
        },
      },
    });
    expect(taken).toEqual(['book-0', 'book-1', 'book-2', 'book-3', 'book-4']);
  });
});

describe('a column of texts posted between threads as UTF-8 bytes', () => {
  it('gives back every text, whatever its characters and length (property, seeded)', () => {
    const seed = Number(process.env.TEST_SEED ?? Date.now() % 2 ** 31);
    process.stdout.write(`text column property seed: ${seed} (replay: TEST_SEED=${seed})\n`);
    const texts = fc.array(fc.oneof(fc.string({ unit: 'grapheme', maxLength: 300 }), fc.string({ maxLength: 5 }), fc.constant('ёжик 💳 €')), { maxLength: 40 });
    fc.assert(
      fc.property(texts, fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }), (given, asBytes) => {
        const builder = new TextColumnBuilder();
        builder.add('left over from the column before');
        builder.take();
        // Each text added as a string, or as the UTF-8 bytes of a field of a larger buffer (a row read by COPY).
        given.forEach((text, k) => {
          if (!asBytes[k]) return builder.add(text);
          const row = Buffer.concat([Buffer.from('before'), Buffer.from(text, 'utf8'), Buffer.from('after')]);
          builder.addBytes(row, 6, row.length - 5);
        });
        expect(builder.length).toBe(given.length);
        const column = builder.take();
        // As another thread receives it: a plain Uint8Array over the moved bytes.
        const posted = { bytes: new Uint8Array(column.bytes), ends: column.ends };
        expect(given.map((_, k) => textAt(column, k))).toEqual(given);
        expect(given.map((_, k) => textAt(posted, k))).toEqual(given);
        expect(builder.length).toBe(0);
      }),
      { seed, numRuns: 300 },
    );
  });
});

describe('repeatedDataFields', () => {
  it('finds a value carried twice within a stream, or in two streams, up to a position, with the events that carry it in log order', async () => {
    await store.appendToStream('book-1', [entry('a', 'e1'), entry('b', 'e2'), entry('a', 'e3')]);
    await store.appendToStream('book-2', [entry('a', 'e2'), entry('z', 'e9')]);
    await store.appendToStream('other-1', [entry('z', 'e9'), entry('z', 'e9')]);
    await store.appendToStream('book-2', [{ id: randomUUID(), type: 'Noted', data: { cause: 'z', entryId: 'e9' } }]);
    const upTo = await head();
    await store.appendToStream('book-2', [entry('z', 'e8')]);
    await head();

    const found = await repeatedDataFields(db.pool, {
      streamNamePrefix: 'book-',
      eventType: 'Posted',
      upTo,
      fields: [
        { field: 'cause', withinStream: true },
        { field: 'entryId', withinStream: false },
      ],
    });
    const summary = found.map((r) => ({ field: r.field, value: r.value, events: r.events.map((e) => `${e.streamName}@${e.revision}`) }));
    // 'a' in both books is no repeat within a stream; 'z' twice in book-2 only after upTo; e9 in other-1 and in a 'Noted' event are not looked at.
    expect(summary).toEqual([
      { field: 'cause', value: 'a', events: ['book-1@0', 'book-1@2'] },
      { field: 'entryId', value: 'e2', events: ['book-1@1', 'book-2@0'] },
    ]);
    expect(found[1]!.events[1]!.data).toEqual({ cause: 'a', entryId: 'e2' });
  });

  it('refuses a field name that is not letters only (it is written into the statement)', async () => {
    await expect(
      repeatedDataFields(db.pool, {
        streamNamePrefix: 'book-',
        eventType: 'Posted',
        upTo: { commit: 0n, prepare: 0n },
        fields: [{ field: "x'--", withinStream: true }],
      }),
    ).rejects.toThrow('not a data field name');
  });
});
