/**
 * Group commit of appends in the PostgreSQL event store (decision 0099): the appends of
 * one event-loop turn go to PostgreSQL in one statement (append_event_group), each with
 * its own expected revision and its own answer. Each must get what it would have got
 * appended alone in arrival order: a conflict refuses only that append, revisions and
 * positions are each append's own, retries and reused ids are told apart as before, and
 * the hash chains are the ones the single append writes (the log verifies). Real
 * PostgreSQL; the contract suite (postgres-event-store.spec.ts) runs over groups too.
 * The forward stream reads of one turn are grouped the same way: each read gets its
 * own stream, range and "no stream" answer, and sees the appends answered before it.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { Pool } from 'pg';
import {
  AppendResult,
  comparePositions,
  DuplicateEventIdError,
  EventToAppend,
  ExpectedRevision,
  Position,
  PostgresEventStore,
  RecordedEvent,
  StreamNotFoundError,
  verifyEventLog,
  WrongExpectedRevisionError,
} from '#event-store';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { fastCheckSeed } from '../support/test-seed';

let db: TestDatabase;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase();
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
});
afterAll(async () => {
  await store.close();
  await db.drop();
});

const event = (type = 'Happened', data: Record<string, unknown> = { n: Math.random() }): EventToAppend => ({ id: randomUUID(), type, data });
const stream = (name: string) => `${name}-${randomUUID()}`;

/** The statements a pool is sent while `run` runs (the database is real; only the calls are counted). */
async function statementsDuring<T>(pool: Pool, run: () => Promise<T>): Promise<{ result: T; texts: string[] }> {
  type Query = (...args: unknown[]) => unknown;
  const texts: string[] = [];
  const counted =
    (query: Query): Query =>
    (...args: unknown[]) => {
      const first = args[0];
      texts.push(typeof first === 'string' ? first : String((first as { text?: string }).text));
      return query(...args);
    };
  const original = { query: pool.query, connect: pool.connect };
  const clients: { client: { query: Query }; query: Query }[] = [];
  // Statements of the pool and of the connections taken from it (an append runs on one of its own).
  Object.assign(pool, {
    query: counted(original.query.bind(pool) as Query),
    // pool.query takes its connection with a callback: left as it is (its statement is counted above).
    connect: (...args: unknown[]) => {
      if (args.length > 0) return (original.connect as (...a: unknown[]) => unknown).apply(pool, args);
      return (original.connect as () => Promise<{ query: Query }>).call(pool).then((client) => {
        clients.push({ client, query: client.query });
        client.query = counted(client.query.bind(client));
        return client;
      });
    },
  });
  try {
    return { result: await run(), texts };
  } finally {
    Object.assign(pool, original);
    for (const { client, query } of clients) client.query = query;
  }
}
/** The events of `names` as stored, stream by stream: id and chain hash at each revision. */
const chainRows = async (pool: Pool, names: readonly string[]) =>
  (
    await pool.query<{ stream_name: string; stream_revision: string; event_id: string; chain_hash: Buffer }>(
      `SELECT stream_name, stream_revision, event_id, chain_hash FROM events WHERE stream_name = ANY($1) ORDER BY stream_name, stream_revision`,
      [names],
    )
  ).rows.map((r) => ({ ...r, chain_hash: r.chain_hash.toString('hex') }));
const grouped = (texts: string[]) => texts.filter((t) => t.includes('append_event_group')).length;

describe('appends of one turn, grouped', () => {
  it('appends to different streams in one group all succeed, in one statement, with their own revisions and positions in arrival order', async () => {
    const a = stream('order');
    const b = stream('order');
    const c = stream('payout');
    await store.appendToStream(b, [event(), event()], { expectedRevision: 'no_stream' });
    await store.appendToStream(c, [event()], { expectedRevision: 'no_stream' });
    const batches = [[event('A1')], [event('B3')], [event('C2'), event('C3')], [event('A2')]];
    const { result, texts } = await statementsDuring(db.pool, () =>
      Promise.all([
        store.appendToStream(a, batches[0]!, { expectedRevision: 'no_stream' }),
        store.appendToStream(b, batches[1]!, { expectedRevision: 1n }),
        store.appendToStream(c, batches[2]!, { expectedRevision: 'stream_exists' }),
        store.appendToStream(a, batches[3]!, { expectedRevision: 'any' }),
      ]),
    );
    expect(texts).toHaveLength(1);
    expect(grouped(texts)).toBe(1);
    expect(result.map((r) => r.nextExpectedRevision)).toEqual([0n, 2n, 2n, 1n]);
    // One transaction: one commit id, the positions ascending in arrival order.
    expect(new Set(result.map((r) => r.position.commit))).toEqual(new Set([result[0]!.position.commit]));
    for (let i = 1; i < result.length; i++) expect(comparePositions(result[i - 1]!.position, result[i]!.position)).toBeLessThan(0);
    expect((await store.readStream(a)).map((e) => [e.type, e.revision])).toEqual([
      ['A1', 0n],
      ['A2', 1n],
    ]);
    expect((await store.readStream(c)).map((e) => e.type)).toEqual(['Happened', 'C2', 'C3']);
    // Each answer is the position of its append's last event in $all.
    const events = [...(await store.readStream(a)), ...(await store.readStream(b)), ...(await store.readStream(c))];
    const last = (name: string, type: string) => events.find((e) => e.streamName === name && e.type === type)!.position;
    expect(result.map((r) => r.position)).toEqual([last(a, 'A1'), last(b, 'B3'), last(c, 'C3'), last(a, 'A2')]);
  });

  it('two appends to one stream in one group with the same expected revision: the first wins, the second gets the conflict naming the new revision', async () => {
    const s = stream('race');
    await store.appendToStream(s, [event()], { expectedRevision: 'no_stream' });
    const winner = event('Winner');
    const { result, texts } = await statementsDuring(db.pool, () =>
      Promise.allSettled([store.appendToStream(s, [winner], { expectedRevision: 0n }), store.appendToStream(s, [event('Loser')], { expectedRevision: 0n })]),
    );
    expect(grouped(texts)).toBe(1);
    expect(result[0]).toEqual({ status: 'fulfilled', value: expect.objectContaining({ nextExpectedRevision: 1n }) });
    expect(result[1]!.status).toBe('rejected');
    const refusal = (result[1] as PromiseRejectedResult).reason as WrongExpectedRevisionError;
    expect(refusal).toBeInstanceOf(WrongExpectedRevisionError);
    expect(refusal.actual).toBe(1n);
    expect((await store.readStream(s)).map((e) => e.id).slice(1)).toEqual([winner.id]);
  });

  it('a conflict refuses only its own append: the others of the group are written', async () => {
    const taken = stream('taken');
    await store.appendToStream(taken, [event()], { expectedRevision: 'no_stream' });
    const fresh = stream('fresh');
    const missing = stream('missing');
    const outcomes = await Promise.allSettled([
      store.appendToStream(fresh, [event()], { expectedRevision: 'no_stream' }),
      store.appendToStream(taken, [event()], { expectedRevision: 'no_stream' }),
      store.appendToStream(missing, [event()], { expectedRevision: 'stream_exists' }),
      store.appendToStream(taken, [event()], { expectedRevision: 5n }),
      store.appendToStream(taken, [event()], { expectedRevision: 0n }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'rejected', 'fulfilled']);
    expect(outcomes.filter((o) => o.status === 'rejected').map((o) => ((o as PromiseRejectedResult).reason as WrongExpectedRevisionError).actual)).toEqual([
      0n,
      'no_stream',
      0n,
    ]);
    expect(await store.readStream(taken)).toHaveLength(2);
    expect(await store.readStream(fresh)).toHaveLength(1);
  });

  it('in one group: a retry of an append is answered as the append, an id reused by another append is refused, neither writes twice', async () => {
    const s = stream('retry');
    const other = stream('other');
    const batch = [event('A'), event('B')];
    const outcomes = await Promise.allSettled([
      store.appendToStream(s, batch, { expectedRevision: 'no_stream' }),
      store.appendToStream(s, batch, { expectedRevision: 'no_stream' }),
      store.appendToStream(other, [batch[0]!], { expectedRevision: 'any' }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    const [first, retry] = outcomes.map((o) => (o.status === 'fulfilled' ? o.value : null)) as [AppendResult, AppendResult];
    expect(retry.nextExpectedRevision).toBe(first.nextExpectedRevision);
    expect(comparePositions(retry.position, first.position)).toBe(0);
    expect((outcomes[2] as PromiseRejectedResult).reason).toBeInstanceOf(DuplicateEventIdError);
    expect((await store.readStream(s)).map((e) => e.id)).toEqual(batch.map((e) => e.id));
  });

  it('an id sent by two appends of one group to distinct streams: the first writes it, the second is refused, in the one statement of the group', async () => {
    const shared = event('Shared');
    const [first, second] = [stream('first'), stream('second')];
    const { result, texts } = await statementsDuring(db.pool, () =>
      Promise.allSettled([
        store.appendToStream(first, [shared], { expectedRevision: 'no_stream' }),
        store.appendToStream(second, [{ ...shared, type: 'Again' }], { expectedRevision: 'no_stream' }),
      ]),
    );
    expect(result.map((o) => o.status)).toEqual(['fulfilled', 'rejected']);
    expect((result[1] as PromiseRejectedResult).reason).toBeInstanceOf(DuplicateEventIdError);
    // Not a group that failed and was made again one append at a time.
    expect(grouped(texts)).toBe(1);
    expect(texts.filter((t) => t.includes('append_lock'))).toEqual([]);
    expect(await store.readStream(second).catch((e: unknown) => e)).toBeInstanceOf(StreamNotFoundError);
  });

  it('a group whose statement fails (an append repeating an id within itself) wrote nothing: each append is then made alone with its own answer', async () => {
    const good = stream('good');
    const bad = stream('bad');
    const twice = event('Twice');
    const alone = new PostgresEventStore(db.pool, { groupAppends: false });
    const expectedRefusal = await alone.appendToStream(stream('bad-alone'), [twice, { ...twice }], { expectedRevision: 'no_stream' }).catch((e: unknown) => e);
    const outcomes = await Promise.allSettled([
      store.appendToStream(good, [event()], { expectedRevision: 'no_stream' }),
      store.appendToStream(bad, [twice, { ...twice }], { expectedRevision: 'no_stream' }),
      store.appendToStream(good, [event()], { expectedRevision: 0n }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(((outcomes[1] as PromiseRejectedResult).reason as Error).constructor).toBe((expectedRefusal as Error).constructor);
    expect(await store.readStream(good)).toHaveLength(2);
    await alone.close();
  });

  it('random groups give the same answers, revisions and hash chains as the same appends made one at a time, and the log verifies (seed printed)', async () => {
    const seed = fastCheckSeed('append-groups random groups');
    const sequentialDb = await createTestDatabase();
    const sequential = new PostgresEventStore(sequentialDb.pool, { groupAppends: false });
    try {
      type Kind = 'any' | 'no_stream' | 'stream_exists' | 'exact';
      const appendShape = fc.record({
        stream: fc.integer({ min: 0, max: 3 }),
        kind: fc.constantFrom<Kind>('any', 'no_stream', 'stream_exists', 'exact', 'exact'),
        exactOffset: fc.integer({ min: -1, max: 1 }),
        events: fc.integer({ min: 1, max: 3 }),
      });
      await fc.assert(
        fc.asyncProperty(fc.array(fc.array(appendShape, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 6 }), async (groups) => {
          const names = [0, 1, 2, 3].map(() => stream('random'));
          // Revisions as the test knows them (the same on both sides while the answers agree).
          const known = names.map(() => -1n);
          const outcome = async (p: Promise<AppendResult>) =>
            p.then(
              (r) => ({ ok: r.nextExpectedRevision }),
              (e: unknown) => ({ refused: (e as Error).name, actual: (e as WrongExpectedRevisionError).actual }),
            );
          for (const group of groups) {
            const appends = group.map((g) => {
              const expected: ExpectedRevision = g.kind === 'exact' ? known[g.stream]! + BigInt(g.exactOffset) : g.kind;
              return { name: names[g.stream]!, expected, events: Array.from({ length: g.events }, (_, i) => event(`E${i}`, { i, text: 'Оплата "чек"\\n' })) };
            });
            const together = await Promise.all(appends.map((a) => outcome(store.appendToStream(a.name, a.events, { expectedRevision: a.expected }))));
            const oneByOne = [];
            for (const a of appends) oneByOne.push(await outcome(sequential.appendToStream(a.name, a.events, { expectedRevision: a.expected })));
            expect(together).toEqual(oneByOne);
            for (const [i, g] of group.entries()) {
              const answer = together[i]!;
              if ('ok' in answer) known[g.stream] = answer.ok;
            }
          }
          expect(await chainRows(db.pool, names)).toEqual(await chainRows(sequentialDb.pool, names));
        }),
        { seed, numRuns: 20 },
      );
      expect((await verifyEventLog(db.pool)).problems).toEqual([]);
    } finally {
      await sequential.close();
      await sequentialDb.drop();
    }
  });

  it('random groups of distinct streams (written by one set-based statement): the same answers, revisions and hash chains as one at a time, retries and reused ids included (seed printed)', async () => {
    const seed = fastCheckSeed('append-groups distinct streams');
    const sequentialDb = await createTestDatabase();
    const sequential = new PostgresEventStore(sequentialDb.pool, { groupAppends: false });
    try {
      type Kind = 'any' | 'no_stream' | 'stream_exists' | 'exact';
      const appendShape = fc.record({
        kind: fc.constantFrom<Kind>('any', 'no_stream', 'stream_exists', 'exact', 'exact'),
        exactOffset: fc.integer({ min: -1, max: 1 }),
        events: fc.integer({ min: 1, max: 3 }),
        // 1: the last append made to this stream sent again (a retry); 2: one of its ids in new events.
        again: fc.constantFrom(0, 0, 0, 1, 2),
      });
      const group = fc.uniqueArray(fc.tuple(fc.integer({ min: 0, max: 7 }), appendShape), { minLength: 2, maxLength: 8, selector: ([s]) => s });
      await fc.assert(
        fc.asyncProperty(fc.array(group, { minLength: 1, maxLength: 5 }), async (groups) => {
          const names = Array.from({ length: 8 }, () => stream('distinct'));
          const known = names.map(() => -1n);
          const last: (EventToAppend[] | undefined)[] = names.map(() => undefined);
          /** The latest transaction of an earlier group: a retry answers with its first append's position, at or before it. */
          let earlierCommit = 0n;
          const outcome = async (p: Promise<AppendResult>) =>
            p.then(
              (r) => ({ ok: r.nextExpectedRevision, commit: r.position.commit > 0n }),
              (e: unknown) => ({ refused: (e as Error).name, actual: (e as WrongExpectedRevisionError).actual }),
            );
          for (const appendsOfGroup of groups) {
            const appends = appendsOfGroup.map(([s, g]) => {
              const expected: ExpectedRevision = g.kind === 'exact' ? known[s]! + BigInt(g.exactOffset) : g.kind;
              const previous = last[s];
              const events =
                previous && g.again === 1
                  ? previous
                  : previous && g.again === 2
                    ? [{ ...event('Reused'), id: previous[0]!.id }]
                    : Array.from({ length: g.events }, (_, i) => event(`E${i}`, { i, text: 'Возврат "чек"\\n' }));
              return { s, name: names[s]!, expected, events };
            });
            const positions: Position[] = [];
            const { result: together, texts } = await statementsDuring(db.pool, () =>
              Promise.all(
                appends.map((a, i) =>
                  outcome(
                    store.appendToStream(a.name, a.events, { expectedRevision: a.expected }).then((r) => {
                      positions[i] = r.position;
                      return r;
                    }),
                  ),
                ),
              ),
            );
            expect(grouped(texts)).toBe(1);
            // The appends this group wrote share its transaction, after every earlier one, in arrival order. A retry
            // answers with its first append's position: an earlier transaction's (a group of retries only writes none).
            const written = positions.filter((p) => p !== undefined && p.commit > earlierCommit);
            expect(new Set(written.map((p) => p.commit)).size).toBeLessThanOrEqual(1);
            for (let i = 1; i < written.length; i++) expect(comparePositions(written[i - 1]!, written[i]!)).toBeLessThan(0);
            for (const p of written) earlierCommit = p.commit;
            const oneByOne = [];
            for (const a of appends) oneByOne.push(await outcome(sequential.appendToStream(a.name, a.events, { expectedRevision: a.expected })));
            expect(together).toEqual(oneByOne);
            for (const [i, a] of appends.entries()) {
              const answer = together[i]!;
              if ('ok' in answer) {
                known[a.s] = answer.ok;
                last[a.s] = a.events;
              }
            }
          }
          expect(await chainRows(db.pool, names)).toEqual(await chainRows(sequentialDb.pool, names));
        }),
        { seed, numRuns: 25 },
      );
      expect((await verifyEventLog(db.pool)).problems).toEqual([]);
    } finally {
      await sequential.close();
      await sequentialDb.drop();
    }
  });

  it('concurrent groups from two stores (two processes) on overlapping streams in opposite orders, looped and set-based: every append written once, every stream keeps its order in $all, the log verifies', async () => {
    const otherStore = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
    try {
      const names = [0, 1, 2, 3].map(() => stream('shared'));
      const reversed = [...names].reverse();
      const rounds = 15;
      // Two appends per stream in a turn (the loop), or one (a group of distinct streams: the set-based statement).
      const writer = async (s: PostgresEventStore, order: string[], perStream: 1 | 2) => {
        for (let r = 0; r < rounds; r++) {
          await Promise.all(order.flatMap((name) => Array.from({ length: perStream }, () => s.appendToStream(name, [event()]))));
        }
      };
      await Promise.all([
        writer(store, names, 2),
        writer(otherStore, reversed, 2),
        writer(store, reversed, 2),
        writer(otherStore, names, 2),
        writer(store, names, 1),
        writer(otherStore, reversed, 1),
      ]);
      // $all's order, read from the table (readAll would wait for transactions of other test databases on the server to end).
      const log = (
        await db.pool.query<{ streamName: string; revision: string }>(
          `SELECT stream_name AS "streamName", stream_revision AS revision FROM events WHERE stream_name = ANY($1) ORDER BY transaction_id, global_position`,
          [names],
        )
      ).rows.map((r) => ({ streamName: r.streamName, revision: BigInt(r.revision) }));
      expect(log).toHaveLength(4 * 4 * rounds * 2 + 2 * 4 * rounds);
      for (const name of names) {
        const revisions = log.filter((e) => e.streamName === name).map((e) => e.revision);
        expect(revisions).toEqual(revisions.map((_, i) => BigInt(i)));
      }
      expect((await verifyEventLog(db.pool)).problems).toEqual([]);
    } finally {
      await otherStore.close();
    }
  });
});

describe('forward stream reads of one turn, grouped', () => {
  it('share one statement; each gets its own stream from its revision and at most its count; a missing stream is refused; a backward read is its own', async () => {
    const a = stream('read');
    const b = stream('read');
    const aEvents = [event('A0'), event('A1'), event('A2'), event('A3')];
    await store.appendToStream(a, aEvents, { expectedRevision: 'no_stream' });
    await store.appendToStream(b, [event('B0')], { expectedRevision: 'no_stream' });
    const types = (events: RecordedEvent[]) => events.map((e) => `${e.type}@${e.revision}`);
    const { result, texts } = await statementsDuring(db.pool, () =>
      Promise.allSettled([
        store.readStream(a),
        store.readStream(b),
        store.readStream(a, { fromRevision: 2n }),
        store.readStream(stream('missing')),
        store.readStream(a, { fromRevision: 1n, maxCount: 2 }),
        store.readStream(b, { fromRevision: 5n }),
        store.readStream(a, { direction: 'backwards', maxCount: 2 }),
      ]),
    );
    // One statement for the six forward reads, one for the backward read.
    expect(texts).toHaveLength(2);
    const answers = result.map((r) => (r.status === 'fulfilled' ? types(r.value) : (r.reason as Error).constructor));
    expect(answers).toEqual([['A0@0', 'A1@1', 'A2@2', 'A3@3'], ['B0@0'], ['A2@2', 'A3@3'], StreamNotFoundError, ['A1@1', 'A2@2'], [], ['A3@3', 'A2@2']]);
    // The events are whole (data, ids, positions), as a read alone gives them.
    const alone = new PostgresEventStore(db.pool, { groupReads: false, groupAppends: false });
    expect((result[0] as PromiseFulfilledResult<RecordedEvent[]>).value).toEqual(await alone.readStream(a));
    await alone.close();
  });

  it('read-your-writes: 30 writers each read their stream right after their append is answered (the reads grouped) and see it', async () => {
    const names = Array.from({ length: 30 }, () => stream('ryw'));
    const seen = await Promise.all(
      names.map(async (name) => {
        const written: string[] = [];
        for (let i = 0; i < 4; i++) {
          const e = event(`W${i}`);
          await store.appendToStream(name, [e], { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
          written.push(e.id);
          const read = await store.readStream(name);
          if (read.map((r) => r.id).join() !== written.join()) return { name, written, read: read.map((r) => r.id) };
        }
        return null;
      }),
    );
    expect(seen.filter((s) => s !== null)).toEqual([]);
  });
});

describe('a group statement that does not answer for every append', () => {
  it('each append of the group is answered: outcome unknown (any may be written), none left waiting', async () => {
    const own = await createTestDatabase();
    const grouped = new PostgresEventStore(own.pool, { pollIntervalMs: 10 });
    try {
      // The function as a later change could break it: the last append's row lost.
      await own.pool.query('ALTER FUNCTION append_event_group(text[], text[], bigint[], jsonb) RENAME TO append_event_group_whole');
      await own.pool.query(`CREATE FUNCTION append_event_group(s text[], k text[], r bigint[], e jsonb)
        RETURNS TABLE (append_ord int, appended_revision bigint, appended_position bigint, appended_commit text, ids_stored boolean, revision_then bigint)
        LANGUAGE sql AS $$ SELECT * FROM append_event_group_whole(s, k, r, e) w WHERE w.append_ord < cardinality(s) $$`);
      const names = [stream('short'), stream('short'), stream('short')];
      const answers = await Promise.allSettled(names.map((name) => grouped.appendToStream(name, [event()], { expectedRevision: 'no_stream' })));
      expect(answers.map((a) => (a.status === 'rejected' ? (a.reason as Error).name : 'answered'))).toEqual(names.map(() => 'AppendOutcomeUnknownError'));
    } finally {
      await grouped.close();
      await own.drop();
    }
  });
});
