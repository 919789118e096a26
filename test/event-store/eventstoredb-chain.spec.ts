/**
 * The hash chain on EventStoreDB, by unit tests of the adapter's mapping (no EventStoreDB
 * server exists here; the contract suite runs only with EVENTSTORE_CONNECTION_STRING):
 * the chain hash carried in the metadata is the one the PostgreSQL store writes for the
 * same events (checked against a real embedded PostgreSQL), the port reads the metadata
 * without it, and the stream check finds an event changed on EventStoreDB.
 */
import { randomUUID } from 'node:crypto';
import { EventStoreDBClient, jsonEvent } from '@eventstore/db-client';
import { ChainedLogSource, EventToAppend, PostgresEventStore, StreamChainCheck, verifyChainedLog, verifyEventLog } from '#event-store';
import {
  CHAIN_HASH_METADATA_KEY,
  ClientRecordedEvent,
  EventStoreDbEventStore,
  chainHashOfMetadata,
  storedChainedEventOf,
  toRecordedEvent,
  withChainHashes,
} from '#event-store/eventstoredb';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { visibleHead } from '../support/project-to-head';

const events = (n: number, callerChainHash = false): EventToAppend[] =>
  Array.from({ length: n }, (_, i) => ({
    id: randomUUID(),
    type: i % 2 === 0 ? 'LedgerEntryPosted' : 'HoldReleased',
    data: { amount: (i + 1) * 12_345, note: `запись ${i}`, big: 1e21, small: 1e-7, nested: { b: 1, a: [i] } },
    ...(i === 1 ? { metadata: { correlationId: `c-${i}`, ...(callerChainHash ? { [CHAIN_HASH_METADATA_KEY]: 'a caller value is replaced' } : {}) } } : {}),
  }));

/** The events as EventStoreDB would hand them back (JSON through the wire, positions of its own). */
const asClientEvents = (streamName: string, appended: readonly EventToAppend[], firstRevision = 0n): ClientRecordedEvent[] =>
  appended.map((e, i) => ({
    id: e.id,
    type: e.type,
    streamId: streamName,
    revision: firstRevision + BigInt(i),
    data: JSON.parse(JSON.stringify(e.data)),
    metadata: JSON.parse(JSON.stringify(e.metadata ?? {})),
    created: new Date('2026-11-23T12:00:00Z'),
    position: { commit: 1000n + BigInt(i), prepare: 1000n + BigInt(i) },
  }));

describe('the chain hash in EventStoreDB metadata', () => {
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

  it('is the chain hash the PostgreSQL store writes for the same events, across appends', async () => {
    const streamName = `ledger-${randomUUID()}`;
    const all = events(5);
    await store.appendToStream(streamName, all.slice(0, 2), { expectedRevision: 'no_stream' });
    await store.appendToStream(streamName, all.slice(2), { expectedRevision: 1n });
    const stored = (
      await db.pool.query<{ chain_hash: Buffer }>('SELECT chain_hash FROM events WHERE stream_name = $1 ORDER BY stream_revision', [streamName])
    ).rows.map((r) => r.chain_hash.toString('hex'));

    const first = withChainHashes(streamName, { previous: null, firstRevision: 0n }, all.slice(0, 2));
    const head = { previous: chainHashOfMetadata(first[1]!.metadata), firstRevision: 2n };
    const rest = withChainHashes(streamName, head, all.slice(2));
    expect([...first, ...rest].map((e) => e.metadata![CHAIN_HASH_METADATA_KEY])).toEqual(stored);
    // The caller's own metadata goes through; a value of its own under the reserved key does not.
    expect(first[1]!.metadata).toEqual({ correlationId: 'c-1', [CHAIN_HASH_METADATA_KEY]: stored[1] });
    const replaced = withChainHashes(
      streamName,
      { previous: null, firstRevision: 0n },
      events(2, true).map((e, i) => ({ ...e, id: all[i]!.id })),
    );
    expect(replaced.map((e) => e.metadata)).toEqual(first.map((e) => e.metadata));
  });

  it('is left out of the metadata the port reads', () => {
    const streamName = `ledger-${randomUUID()}`;
    const chained = withChainHashes(streamName, { previous: null, firstRevision: 0n }, events(2, true));
    const read = asClientEvents(streamName, chained).map(toRecordedEvent);
    expect(read.map((e) => e.metadata)).toEqual([{}, { correlationId: 'c-1' }]);
  });

  it('lets the stream check recompute the chain, and find an event changed on the server', () => {
    const streamName = `ledger-${randomUUID()}`;
    const chained = withChainHashes(streamName, { previous: null, firstRevision: 0n }, events(4));
    const clean = new StreamChainCheck();
    for (const e of asClientEvents(streamName, chained)) clean.event(storedChainedEventOf(e));
    clean.finish();
    expect(clean.problems).toEqual([]);

    const tampered = asClientEvents(streamName, chained);
    tampered[2] = { ...tampered[2]!, data: { ...(tampered[2]!.data as object), amount: 1 } };
    const check = new StreamChainCheck();
    for (const e of tampered) check.event(storedChainedEventOf(e));
    check.finish();
    expect(check.problems).toEqual([expect.objectContaining({ kind: 'data_changed', streamName, revision: 2n, position: '1002/1002' })]);
  });
});

/** A log as EventStoreDB holds it: its events in log order, each with the chain hash in its metadata. */
function memoryChainedLog(log: readonly ClientRecordedEvent[]): ChainedLogSource<number> {
  const stored = log.map(storedChainedEventOf);
  return {
    logPage: async (after, maxCount) => {
      const from = after ?? 0;
      const events = stored.slice(from, from + maxCount);
      return { events, next: from + events.length };
    },
    streamPage: async (streamName, fromRevision, maxCount) =>
      stored
        .filter((e) => e.streamName === streamName && e.revision >= fromRevision)
        .sort((x, y) => (x.revision < y.revision ? -1 : 1)) // a stream reads in revision order
        .slice(0, maxCount),
  };
}

describe('verifying a whole log whose chain hashes are in the metadata (EventStoreDB)', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  const a = `ledger-${randomUUID()}`;
  const b = `invoice-${randomUUID()}`;
  const appends: { streamName: string; events: EventToAppend[]; expected: bigint | 'no_stream' }[] = [];
  let log: ClientRecordedEvent[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    const [a0, b0, a2] = [events(2), events(2), events(3)];
    appends.push(
      { streamName: a, events: a0, expected: 'no_stream' },
      { streamName: b, events: b0, expected: 'no_stream' },
      { streamName: a, events: a2, expected: 1n },
    );
    const heads = new Map<string, { previous: Buffer | null; firstRevision: bigint }>();
    for (const append of appends) {
      await store.appendToStream(append.streamName, append.events, { expectedRevision: append.expected });
      const head = heads.get(append.streamName) ?? { previous: null, firstRevision: 0n };
      const chained = withChainHashes(append.streamName, head, append.events);
      const client = asClientEvents(append.streamName, chained, head.firstRevision).map((e, i) => ({
        ...e,
        position: { commit: 5000n + BigInt(log.length + i), prepare: 5000n + BigInt(log.length + i) },
      }));
      log = [...log, ...client];
      heads.set(append.streamName, {
        previous: chainHashOfMetadata(chained[chained.length - 1]!.metadata),
        firstRevision: head.firstRevision + BigInt(chained.length),
      });
    }
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  it('finds nothing in an untouched log, and gives the running hash the PostgreSQL log gives for the same appends', async () => {
    const report = await verifyChainedLog(memoryChainedLog(log), { pageSize: 2, at: ['5002/5002'] });
    expect(report.problems).toEqual([]);
    expect([report.streams, report.events]).toEqual([2, 7]);
    // The PostgreSQL log shows what no open transaction of the cluster can still
    // precede: another test file's transaction can hide the appends for a moment.
    await visibleHead(db.pool, store);
    const onPostgres = await verifyEventLog(db.pool);
    expect(onPostgres.problems).toEqual([]);
    expect(onPostgres.events).toBe(7);
    expect(report.head.hash.toString('hex')).toBe(onPostgres.head.hash.toString('hex'));
    expect(report.head).toMatchObject({ position: '5006/5006', events: 7n });
    expect(report.at.get('5002/5002')?.events).toBe(3n);
  });

  it('names an edited event, a stream whose first events are gone, and revisions out of order in the log', async () => {
    const edited = log.map((e) => (e.streamId === b && e.revision === 1n ? { ...e, data: { ...(e.data as object), amount: 1 } } : e));
    expect((await verifyChainedLog(memoryChainedLog(edited))).problems).toEqual([
      expect.objectContaining({ kind: 'data_changed', streamName: b, revision: 1n, position: '5003/5003' }),
    ]);

    // A truncated stream (EventStoreDB's $tb): its reads start past revision 0.
    const truncated = log.filter((e) => !(e.streamId === a && e.revision < 2n));
    expect((await verifyChainedLog(memoryChainedLog(truncated))).problems).toEqual([
      expect.objectContaining({ kind: 'event_missing', streamName: a, revision: 0n, position: '5004/5004' }),
    ]);

    const reordered = [...log];
    [reordered[4], reordered[5]] = [reordered[5]!, reordered[4]!];
    expect((await verifyChainedLog(memoryChainedLog(reordered))).problems).toEqual([
      expect.objectContaining({ kind: 'order_changed', streamName: a, revision: 2n }),
    ]);
  });
});

const connectionString = process.env.EVENTSTORE_CONNECTION_STRING;
if (connectionString) {
  describe('verifying the log of a real EventStoreDB server', () => {
    it('finds nothing in streams appended through the adapter, and names an event appended with a wrong chain hash', async () => {
      const esdb = EventStoreDbEventStore.fromConnectionString(connectionString);
      const client = EventStoreDBClient.connectionString`${connectionString}`;
      try {
        const good = `ledger-${randomUUID()}`;
        const bad = `ledger-${randomUUID()}`;
        await esdb.appendToStream(good, events(3), { expectedRevision: 'no_stream' });
        const [first, second] = withChainHashes(bad, { previous: null, firstRevision: 0n }, events(2));
        await client.appendToStream(
          bad,
          [first!, { ...second!, metadata: { ...second!.metadata, [CHAIN_HASH_METADATA_KEY]: '0'.repeat(64) } }].map((e) =>
            jsonEvent({ id: e.id, type: e.type, data: e.data, metadata: e.metadata }),
          ),
        );
        const report = await verifyChainedLog(esdb.chainedLog());
        expect(report.problems.filter((p) => p.streamName === good)).toEqual([]);
        expect(report.problems.filter((p) => p.streamName === bad)).toEqual([expect.objectContaining({ streamName: bad, revision: 1n })]);
      } finally {
        await client.dispose();
        await esdb.close();
      }
    }, 60_000);
  });
} else {
  describe('verifying the log of a real EventStoreDB server', () => {
    it.todo('runs only when EVENTSTORE_CONNECTION_STRING is set (no EventStoreDB server can be installed on the build machines)');
  });
}
