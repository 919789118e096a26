/**
 * The hash chain of the PostgreSQL event store (docs/audit-log.md): the append path
 * (SQL, event_chain_hashes) and the TypeScript definition (chainContent over
 * canonicalJson) give the same hashes byte for byte; canonicalJson is PostgreSQL's
 * jsonb text for any JSON value; the checkpoint follows the log.
 */
import { createHash, randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { Pool } from 'pg';
import {
  canonicalJson,
  chainContent,
  chainHashes,
  eventChainHash,
  ContentBytesDigest,
  EventToAppend,
  extendLogCheckpoints,
  logCheckpointAt,
  GENESIS_HASH,
  nextChainHash,
  nextLogHash,
  PostgresEventStore,
  RunningLogHash,
  verifyEventLog,
} from '#event-store';
import { visibleHead } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';

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

const event = (type: string, data: Record<string, unknown>, metadata?: Record<string, unknown>): EventToAppend => ({
  id: randomUUID(),
  type,
  data,
  ...(metadata ? { metadata } : {}),
});

async function storedHashes(pool: Pool, streamName: string): Promise<Buffer[]> {
  const rows = await pool.query<{ chain_hash: Buffer }>('SELECT chain_hash FROM events WHERE stream_name = $1 ORDER BY stream_revision', [streamName]);
  return rows.rows.map((r) => r.chain_hash);
}

/** The chain hashes TypeScript computes for a stream's events as appended. */
function expectedHashes(streamName: string, events: readonly EventToAppend[]): Buffer[] {
  return chainHashes(
    null,
    events.map((e, i) => ({
      streamName,
      revision: BigInt(i),
      id: e.id,
      type: e.type,
      dataJson: canonicalJson(e.data),
      metadataJson: canonicalJson(e.metadata ?? {}),
    })),
  );
}

describe('canonical JSON is the jsonb text of PostgreSQL', () => {
  it('for awkward values: key order by byte length, exponents, escapes, non-ASCII', async () => {
    const samples: unknown[] = [
      { b: 1, a: 2, aa: 3, ё: 4, z: { y: [1, 2, { c: null }] } },
      { big: 1e21, small: 1e-7, neg: -2.5e-10, n: 123456789012345, f: 0.1, z: -0 },
      { s: 'кириллица "кавычки" \\ \n\t\r\b\f \u0001 \u001f \u007f / 😀' },
      { '': 1, ' ': 2, AB: 3, aB: 4, Ab: 5 },
      { nested: { arr: [[], {}, [{}], 'x'] }, t: true, f: false },
    ];
    for (const value of samples) {
      const pg = await db.pool.query<{ text: string }>('SELECT $1::jsonb::text AS text', [JSON.stringify(value)]);
      expect(canonicalJson(value)).toBe(pg.rows[0]!.text);
    }
  });

  it('for random JSON values (property, seeded)', async () => {
    const seed = Number(process.env.TEST_SEED ?? Date.now() % 2 ** 31);
    process.stdout.write(`canonical JSON property seed: ${seed} (replay: TEST_SEED=${seed})\n`);
    // PostgreSQL stores neither \u0000 nor lone surrogates in jsonb: strings without them.
    const text = fc.string({ unit: 'binary' }).map((s) => s.replaceAll('\u0000', '').replace(/[\ud800-\udfff]/g, ''));
    const { json: value } = fc.letrec((tie) => ({
      json: fc.oneof(
        { depthSize: 'small' },
        fc.constant(null),
        fc.boolean(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.integer(),
        text,
        fc.array(tie('json'), { maxLength: 4 }),
        fc.dictionary(text, tie('json'), { maxKeys: 5 }),
      ),
    }));
    await fc.assert(
      fc.asyncProperty(fc.dictionary(text, value, { maxKeys: 6 }), async (data) => {
        const pg = await db.pool.query<{ text: string }>('SELECT $1::jsonb::text AS text', [JSON.stringify(data)]);
        expect(canonicalJson(data)).toBe(pg.rows[0]!.text);
      }),
      { seed, numRuns: 300 },
    );
  });
});

describe("an event's chain hash in one buffer", () => {
  it('is SHA-256(previous ‖ content) as defined, for any text and a previous hash of any length (property, seeded)', () => {
    const seed = Number(process.env.TEST_SEED ?? Date.now() % 2 ** 31);
    process.stdout.write(`event chain hash property seed: ${seed} (replay: TEST_SEED=${seed})\n`);
    const text = fc.string({ unit: 'binary' });
    fc.assert(
      fc.property(
        fc.option(fc.uint8Array({ minLength: 0, maxLength: 40 }), { nil: null }),
        fc.record({
          streamName: text,
          revision: fc.bigInt({ min: 0n, max: 2n ** 62n }),
          id: fc.uuid(),
          type: text,
          dataJson: text,
          metadataJson: text,
        }),
        (previous, event) => {
          const before = previous === null ? null : Buffer.from(previous);
          expect(eventChainHash(before, event).toString('hex')).toBe(nextChainHash(before, chainContent(event)).toString('hex'));
        },
      ),
      { seed, numRuns: 500 },
    );
  });

  it("the log's running hash is SHA-256(previous ‖ chain hash), for hashes of any bytes (property, seeded)", () => {
    const seed = Number(process.env.TEST_SEED ?? Date.now() % 2 ** 31);
    process.stdout.write(`running hash property seed: ${seed} (replay: TEST_SEED=${seed})\n`);
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.uint8Array({ minLength: 0, maxLength: 40 }), (previous, chainHash) => {
        const [p, c] = [Buffer.from(previous), Buffer.from(chainHash)];
        expect(nextLogHash(p, c).toString('hex')).toBe(createHash('sha256').update(p).update(c).digest('hex'));
      }),
      { seed, numRuns: 500 },
    );
  });
});

describe('the digests a verification takes as hex', () => {
  it("an event's chain hash taken over the UTF-8 bytes of a row's fields (any order, anything between them), its previous hash at an offset of a larger buffer, is eventChainHash's as hex (property, seeded)", () => {
    const seed = Number(process.env.TEST_SEED ?? Date.now() % 2 ** 31);
    process.stdout.write(`chain hash over row bytes property seed: ${seed} (replay: TEST_SEED=${seed})\n`);
    const text = fc.string({ unit: 'binary' });
    // Data sometimes longer than the digest's first input buffer (4 KiB): it grows.
    const data = fc.oneof(text, fc.string({ unit: 'binary', minLength: 1500, maxLength: 3000 }));
    // Several events through one digest: its reused input never carries one event's bytes into the next.
    const digest = new ContentBytesDigest({ streamName: 4, id: 1, type: 0, data: 3, metadata: 2 });
    fc.assert(
      fc.property(
        fc.option(fc.uint8Array({ minLength: 32, maxLength: 32 }), { nil: null }),
        fc.nat({ max: 5 }),
        fc.record({ streamName: text, revision: fc.nat({ max: Number.MAX_SAFE_INTEGER }), id: fc.uuid(), type: text, dataJson: data, metadataJson: text }),
        fc.array(fc.uint8Array({ maxLength: 7 }), { minLength: 6, maxLength: 6 }),
        (previous, slot, event, gaps) => {
          const slots = Buffer.alloc(6 * 32, 0xab);
          if (previous !== null) slots.set(previous, slot * 32);
          // The fields in the order type, id, metadata, data, stream name, with bytes of other columns between them.
          const fields = [event.type, event.id, event.metadataJson, event.dataJson, event.streamName];
          const parts: Buffer[] = [];
          const starts = new Int32Array(5);
          const ends = new Int32Array(5);
          let at = 0;
          fields.forEach((field, i) => {
            const gap = Buffer.from(gaps[i]!);
            const bytes = Buffer.from(field, 'utf8');
            starts[i] = at + gap.length;
            ends[i] = starts[i]! + bytes.length;
            at = ends[i]!;
            parts.push(gap, bytes);
          });
          parts.push(Buffer.from(gaps[5]!));
          const content = { ...event, revision: BigInt(event.revision) };
          const expected = eventChainHash(previous === null ? null : Buffer.from(previous), content).toString('hex');
          expect(digest.digest(previous === null ? null : slots, slot * 32, Buffer.concat(parts), starts, ends, event.revision)).toBe(expected);
        },
      ),
      { seed, numRuns: 500 },
    );
  });

  it('the running hash folded in one reused buffer gives nextLogHash at every step, an event without a chain hash as 32 zero bytes (property, seeded)', () => {
    const seed = Number(process.env.TEST_SEED ?? Date.now() % 2 ** 31);
    process.stdout.write(`running hash fold property seed: ${seed} (replay: TEST_SEED=${seed})\n`);
    fc.assert(
      fc.property(fc.array(fc.option(fc.uint8Array({ minLength: 32, maxLength: 32 }), { nil: null }), { maxLength: 20 }), (chain) => {
        const folded = new RunningLogHash();
        let expected = GENESIS_HASH;
        expect(folded.bytes).toEqual(expected);
        for (const hash of chain) {
          const page = Buffer.alloc(96, 0xcd);
          if (hash !== null) page.set(hash, 32);
          folded.add(hash === null ? null : page, 32);
          expected = nextLogHash(expected, hash === null ? GENESIS_HASH : Buffer.from(hash));
          expect(folded.bytes.toString('hex')).toBe(expected.toString('hex'));
        }
      }),
      { seed, numRuns: 300 },
    );
  });
});

describe('the append path writes the chain TypeScript computes', () => {
  it('for single and batched appends with every kind of expected revision', async () => {
    const stream = `order-${randomUUID()}`;
    const events = [
      event('Created', { amount: 100_000, note: 'первый', tags: ['a', 'b'] }, { correlationId: 'c-1' }),
      event('Paid', { amount: 100_000, at: '2026-11-23T10:00:00.000Z', big: 1e21 }),
      event('Refunded', { amount: 5_000, f: 0.25 }),
      event('Closed', {}),
      event('Noted', { text: 'ключ "b" и \\ и \n' }),
    ];
    await store.appendToStream(stream, [events[0]!], { expectedRevision: 'no_stream' });
    await store.appendToStream(stream, [events[1]!, events[2]!], { expectedRevision: 0n });
    await store.appendToStream(stream, [events[3]!], { expectedRevision: 'stream_exists' });
    await store.appendToStream(stream, [events[4]!], { expectedRevision: 'any' });
    expect((await storedHashes(db.pool, stream)).map((h) => h.toString('hex'))).toEqual(expectedHashes(stream, events).map((h) => h.toString('hex')));
    const fresh = `order-${randomUUID()}`;
    const batch = [event('A', { n: 1 }), event('B', { n: 2 })];
    await store.appendToStream(fresh, batch, { expectedRevision: 'any' });
    expect(await storedHashes(db.pool, fresh)).toEqual(expectedHashes(fresh, batch));
  });

  it('concurrent appends to one stream still make one chain (real concurrent appends)', async () => {
    const stream = `race-${randomUUID()}`;
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.appendToStream(stream, [event('Step', { i })], { expectedRevision: 'any' })));
    const stored = await db.pool.query<{ event_id: string; event_type: string; data: Record<string, unknown> }>(
      'SELECT event_id, event_type, data FROM events WHERE stream_name = $1 ORDER BY stream_revision',
      [stream],
    );
    const asAppended = stored.rows.map((r) => ({ id: r.event_id, type: r.event_type, data: r.data }));
    expect(await storedHashes(db.pool, stream)).toEqual(expectedHashes(stream, asAppended));
    const report = await verifyEventLog(db.pool);
    expect(report.problems).toEqual([]);
  });
});

describe('the checkpoint', () => {
  it('folds the chain hashes in log order, moves when events are appended, and is what verification recomputes', async () => {
    // A checkpoint covers the visible log: wait until no transaction of another test
    // database of the shared cluster hides the events written here.
    await visibleHead(db.pool, store);
    const first = await extendLogCheckpoints(db.pool, { segmentEvents: 7 });
    const rows = await db.pool.query<{ chain_hash: Buffer }>('SELECT chain_hash FROM events ORDER BY transaction_id, global_position');
    let running = GENESIS_HASH;
    for (const r of rows.rows) running = nextLogHash(running, r.chain_hash);
    expect({ events: first.events, hash: first.hash.toString('hex') }).toEqual({ events: BigInt(rows.rows.length), hash: running.toString('hex') });
    // Unchanged log: the same checkpoint.
    expect(await extendLogCheckpoints(db.pool)).toEqual(first);

    await store.appendToStream(`order-${randomUUID()}`, [event('Created', { amount: 1 })]);
    await visibleHead(db.pool, store);
    const second = await extendLogCheckpoints(db.pool);
    expect(second.events).toBe(first.events + 1n);
    expect(second.hash.equals(first.hash)).toBe(false);

    const report = await verifyEventLog(db.pool, { at: [first.position, second.position] });
    expect(report.problems).toEqual([]);
    expect(report.checkpointsCompared).toBeGreaterThan(1);
    expect(report.at.get(first.position)).toEqual(first);
    expect(report.head).toEqual(second);

    // The running hash at a position inside a recorded segment (a statement's checkpoint), and past the recorded ones.
    const all = await db.pool.query<{ position: string; chain_hash: Buffer }>(
      `SELECT transaction_id::text || '/' || global_position AS position, chain_hash FROM events ORDER BY transaction_id, global_position`,
    );
    let hash = GENESIS_HASH;
    for (const [i, r] of all.rows.entries()) {
      hash = nextLogHash(hash, r.chain_hash);
      if (i % 5 === 2) expect(await logCheckpointAt(db.pool, r.position)).toEqual({ position: r.position, events: BigInt(i + 1), hash });
    }
    expect(await logCheckpointAt(db.pool, second.position)).toEqual(second);
    expect(await logCheckpointAt(db.pool, `${BigInt(second.position.split('/')[0]!) + 1000n}/0`)).toBeNull();
  });

  it('a read bounded by a head chosen before compares no checkpoint recorded past it meanwhile (no false "event_missing")', async () => {
    // ledger:verify takes the head, then reads the log up to it; a merchant's statement meanwhile records a checkpoint
    // past that head.
    await visibleHead(db.pool, store);
    const chosen = await extendLogCheckpoints(db.pool);
    const upTo = { commit: BigInt(chosen.position.split('/')[0]!), prepare: BigInt(chosen.position.split('/')[1]!) };
    await store.appendToStream(`order-${randomUUID()}`, [event('Created', { amount: 2 }), event('Created', { amount: 3 })]);
    await visibleHead(db.pool, store);
    const meanwhile = await extendLogCheckpoints(db.pool);
    expect(meanwhile.events).toBe(chosen.events + 2n);
    const report = await verifyEventLog(db.pool, { upTo });
    expect(report.problems).toEqual([]);
    expect(report.head).toEqual(chosen);
  });

  it('extends a long backlog in transactions of a few segments each, committed as it goes', async () => {
    // Before, one transaction covered the whole backlog and held every segment's hashes in
    // memory until its end: 100 million unchecked events were 3.2 GB and minutes in one
    // transaction, on a merchant's GET /v1/statements.
    await visibleHead(db.pool, store);
    const before = await extendLogCheckpoints(db.pool);
    for (let i = 0; i < 20; i++) await store.appendToStream(`order-${randomUUID()}`, [event('Created', { amount: i })]);
    await visibleHead(db.pool, store);
    const head = await extendLogCheckpoints(db.pool, { segmentEvents: 3, segmentsPerTransaction: 2 });
    expect(head.events).toBe(before.events + 20n);
    const written = await db.pool.query<{ rows: number }>(
      `SELECT count(*)::int AS rows FROM event_log_checkpoints WHERE events > $1 GROUP BY xmin ORDER BY min(seq)`,
      [before.events.toString()],
    );
    // 20 events in segments of 3: 7 rows, in transactions of at most 2.
    expect(written.rows.map((r) => r.rows)).toEqual([2, 2, 2, 1]);
    expect(await extendLogCheckpoints(db.pool)).toEqual(head);
    expect((await verifyEventLog(db.pool, { at: [head.position] })).problems).toEqual([]);
  });
});
