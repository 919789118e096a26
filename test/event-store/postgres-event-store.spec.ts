import { randomUUID } from 'node:crypto';
import {
  AppendOutcomeUnknownError,
  AppendTooLateError,
  comparePositions,
  DuplicateEventIdError,
  EventStoreUnavailableError,
  PostgresEventStore,
  RecordedEvent,
  STREAM_APPEND_LOCK_NAMESPACE,
  StreamNotFoundError,
} from '#event-store';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { eventStoreContract } from './event-store.contract';

let db: TestDatabase;
let store: PostgresEventStore;

eventStoreContract(
  'PostgreSQL',
  async () => {
    db = await createTestDatabase({ poolSize: 30 });
    store = new PostgresEventStore(db.pool);
    return store;
  },
  async () => {
    await store.close();
    await db.drop();
  },
  { refusesEventIds: 'everywhere' },
);

describe('PostgreSQL event store specifics', () => {
  let local: TestDatabase;
  let localStore: PostgresEventStore;

  beforeAll(async () => {
    local = await createTestDatabase();
    localStore = new PostgresEventStore(local.pool, { pollIntervalMs: 10 });
  });
  afterAll(async () => {
    await localStore.close();
    await local.drop();
  });

  it('never skips a transaction that took an earlier position but commits later', async () => {
    const subscription = localStore.subscribeToAll({ filter: { streamNamePrefixes: ['order-'] } });
    const received: RecordedEvent[] = [];
    const consuming = (async () => {
      for await (const batch of subscription) {
        received.push(...batch.events);
        if (received.length >= 2) return;
      }
    })();

    // Transaction A takes its global position first and stays open...
    const slow = await local.pool.connect();
    await slow.query('BEGIN');
    // (Every event carries its chain hash, NOT NULL: computed as the append path does.)
    const earlyId = randomUUID();
    const earlyHashes = `event_chain_hashes(NULL, 'order-early', 0, jsonb_build_array(jsonb_build_object('id', $1::text, 'type', 'Early', 'data', '{}'::jsonb, 'metadata', '{}'::jsonb)))`;
    await slow.query(`INSERT INTO event_streams (stream_name, revision, chain_hashes) VALUES ('order-early', 0, ${earlyHashes})`, [earlyId]);
    const earlyRow = await slow.query<{ global_position: string }>(
      `INSERT INTO events (stream_name, stream_revision, event_id, event_type, data, chain_hash)
       VALUES ('order-early', 0, $1::text::uuid, 'Early', '{}', (${earlyHashes})[1]) RETURNING global_position`,
      [earlyId],
    );

    // ...while transaction B, with a later position, commits first.
    const late = await localStore.appendToStream('order-late', [{ id: randomUUID(), type: 'Late', data: {} }], {
      expectedRevision: 'no_stream',
    });
    expect(late.position.prepare).toBeGreaterThan(BigInt(earlyRow.rows[0]!.global_position));

    // The subscriber must not move past A's position while A is still open.
    await new Promise((r) => setTimeout(r, 200));
    expect(received.map((e) => e.type)).toEqual([]);

    await slow.query('COMMIT');
    slow.release();
    await consuming;
    await subscription.unsubscribe();
    expect(received.map((e) => e.type)).toEqual(['Early', 'Late']);
  });

  it('an append with notAfter is checked by its statement once written: held past it (a lock, a stall), it is rolled back', async () => {
    const streamName = `dated-${randomUUID()}`;
    await localStore.appendToStream(streamName, [{ id: randomUUID(), type: 'A', data: {} }], { expectedRevision: 'no_stream' });
    // Another append of the stream holds its lock for 600 ms: this one, sent in time, writes after its deadline.
    const holder = await local.pool.connect();
    await holder.query('SELECT pg_advisory_lock($1, hashtext($2))', [STREAM_APPEND_LOCK_NAMESPACE, streamName]);
    const late = localStore
      .appendToStream(streamName, [{ id: randomUUID(), type: 'B', data: {} }], { expectedRevision: 0n, notAfter: new Date(Date.now() + 200) })
      .catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 600));
    await holder.query('SELECT pg_advisory_unlock($1, hashtext($2))', [STREAM_APPEND_LOCK_NAMESPACE, streamName]);
    holder.release();
    expect(await late).toBeInstanceOf(AppendTooLateError);
    const stored = await localStore.readStream(streamName);
    expect(stored.map((e) => e.type)).toEqual(['A']);
    // The stream's revision did not move: the next append at revision 0 is written.
    const next = await localStore.appendToStream(streamName, [{ id: randomUUID(), type: 'C', data: {} }], { expectedRevision: 0n });
    expect(next.nextExpectedRevision).toBe(1n);
  });

  it('an append with notAfter is not grouped: appends of the same turn without one are written as a group beside it', async () => {
    const names = [0, 1, 2].map(() => `dated-turn-${randomUUID()}`);
    const results = await Promise.all([
      localStore
        .appendToStream(names[0]!, [{ id: randomUUID(), type: 'A', data: {} }], { expectedRevision: 'no_stream', notAfter: new Date(Date.now() - 1) })
        .catch((e: unknown) => e),
      localStore.appendToStream(names[1]!, [{ id: randomUUID(), type: 'A', data: {} }], { expectedRevision: 'no_stream' }),
      localStore.appendToStream(names[2]!, [{ id: randomUUID(), type: 'A', data: {} }], { expectedRevision: 'no_stream' }),
    ]);
    expect(results[0]).toBeInstanceOf(AppendTooLateError);
    expect(results.slice(1).map((r) => (r as { nextExpectedRevision: bigint }).nextExpectedRevision)).toEqual([0n, 0n]);
    await expect(localStore.readStream(names[0]!)).rejects.toBeInstanceOf(StreamNotFoundError);
  });

  it('refuses event ids already used by another append', async () => {
    const id = randomUUID();
    await localStore.appendToStream('reuse-a', [{ id, type: 'X', data: {} }]);
    await expect(localStore.appendToStream('reuse-b', [{ id, type: 'X', data: {} }])).rejects.toBeInstanceOf(DuplicateEventIdError);
    await expect(localStore.readStream('reuse-b')).rejects.toThrow('not found');
  });

  it('the same event ids at another expected revision are not a retry', async () => {
    const first = { id: randomUUID(), type: 'X', data: {} };
    await localStore.appendToStream('again-a', [first], { expectedRevision: 'no_stream' });
    await localStore.appendToStream('again-a', [{ id: randomUUID(), type: 'Y', data: {} }], { expectedRevision: 0n });
    await expect(localStore.appendToStream('again-a', [first], { expectedRevision: 1n })).rejects.toBeInstanceOf(DuplicateEventIdError);
    expect(await localStore.readStream('again-a')).toHaveLength(2);
  });

  it('an append is all or nothing', async () => {
    const id = randomUUID();
    await localStore.appendToStream('atomic-a', [{ id, type: 'X', data: {} }]);
    await expect(
      localStore.appendToStream('atomic-b', [
        { id: randomUUID(), type: 'X', data: {} },
        { id, type: 'X', data: {} },
      ]),
    ).rejects.toBeInstanceOf(DuplicateEventIdError);
    const count = await local.pool.query(`SELECT count(*)::int AS n FROM events WHERE stream_name = 'atomic-b'`);
    expect(count.rows[0].n).toBe(0);
  });

  it('an append whose connection broke is looked for: committed, it is answered so; not written, the error stands; no look, unknown', async () => {
    // The append's statement reaches the server (or not), then its connection breaks: the answer is lost.
    let breakConnection: 'after the commit' | 'before the statement' | 'after the commit, and the look too' | null = null;
    // The append runs on a connection of its own (pool.connect), the look on the pool.
    const breakable = (query: (config: never, values?: never) => Promise<unknown>) => async (config: string | { text: string }, values?: unknown[]) => {
      const text = typeof config === 'string' ? config : config.text;
      const breaking = breakConnection;
      if (breaking === 'after the commit, and the look too' && text.includes('WHERE event_id = ANY')) throw new Error('Connection terminated unexpectedly');
      if (breaking === null || !text.includes('append_lock')) return query(config as never, values as never);
      if (breaking !== 'before the statement') await query(config as never, values as never);
      throw new Error('Connection terminated unexpectedly');
    };
    const pool = new Proxy(local.pool, {
      get(target, property) {
        if (property === 'query') return breakable(target.query.bind(target));
        if (property === 'connect')
          return async () => {
            // The pool's own client (the server confirmed its process), its statements breakable until released.
            const client = await target.connect();
            const own = { query: client.query, release: client.release };
            Object.assign(client, {
              query: breakable(own.query.bind(client) as never),
              release: (error?: Error | boolean) => {
                Object.assign(client, own);
                return own.release.call(client, error);
              },
            });
            return client;
          };
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const broken = new PostgresEventStore(pool);
    try {
      breakConnection = 'after the commit';
      const first = await broken.appendToStream('lost-answer', [{ id: randomUUID(), type: 'X', data: {} }], { expectedRevision: 'no_stream' });
      const second = await broken.appendToStream('lost-answer', [{ id: randomUUID(), type: 'Y', data: {} }], { expectedRevision: 0n });
      expect([first.nextExpectedRevision, second.nextExpectedRevision]).toEqual([0n, 1n]);
      expect((await localStore.readStream('lost-answer')).map((e) => e.type)).toEqual(['X', 'Y']);

      breakConnection = 'before the statement';
      await expect(broken.appendToStream('lost-answer', [{ id: randomUUID(), type: 'Z', data: {} }], { expectedRevision: 1n })).rejects.toThrow(
        'Connection terminated',
      );
      await expect(broken.appendToStream('never-written', [{ id: randomUUID(), type: 'Z', data: {} }])).rejects.toThrow('Connection terminated');
      expect(await localStore.readStream('lost-answer')).toHaveLength(2);
      await expect(localStore.readStream('never-written')).rejects.toThrow('not found');

      // Written, but the look for it fails too: nobody can tell, and the error says so.
      breakConnection = 'after the commit, and the look too';
      const unknown = await broken
        .appendToStream('lost-answer', [{ id: randomUUID(), type: 'W', data: {} }], { expectedRevision: 1n })
        .catch((e: unknown) => e);
      expect(unknown).toBeInstanceOf(AppendOutcomeUnknownError);
      expect(unknown).toBeInstanceOf(EventStoreUnavailableError);
      expect((await localStore.readStream('lost-answer')).map((e) => e.type)).toEqual(['X', 'Y', 'W']);
    } finally {
      await broken.close();
    }
  });

  it('reports the head of the log', async () => {
    const result = await localStore.appendToStream('head-a', [{ id: randomUUID(), type: 'X', data: {} }]);
    // The head moves once every older transaction of the cluster has ended (other test
    // files run their own transactions alongside): wait for it, bounded.
    const deadline = Date.now() + 10_000;
    let head = await localStore.headPosition();
    while (!(head && comparePositions(head, result.position) >= 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
      head = await localStore.headPosition();
    }
    expect(head).toEqual(result.position);
  });
});
