/**
 * The hash chain on EventStoreDB, by unit tests of the adapter's mapping (no EventStoreDB
 * server exists here; the contract suite runs only with EVENTSTORE_CONNECTION_STRING):
 * the chain hash carried in the metadata is the one the PostgreSQL store writes for the
 * same events (checked against a real embedded PostgreSQL), the port reads the metadata
 * without it, and the stream check finds an event changed on EventStoreDB.
 */
import { randomUUID } from 'node:crypto';
import { EventToAppend, PostgresEventStore, StreamChainCheck } from '#event-store';
import {
  CHAIN_HASH_METADATA_KEY,
  ClientRecordedEvent,
  chainHashOfMetadata,
  storedChainedEventOf,
  toRecordedEvent,
  withChainHashes,
} from '#event-store/eventstoredb';
import { createTestDatabase, TestDatabase } from '../support/test-database';

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
