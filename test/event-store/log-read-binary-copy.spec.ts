/**
 * The read of the log in one statement (decision 0123): `COPY (SELECT ...) TO STDOUT
 * (FORMAT binary)` decoded by BinaryCopyRows from chunks cut anywhere, with every
 * value PostgreSQL sends read back exactly; a verification that reads the log while
 * appends go on checks the log as it was when its statement started; a read stopped
 * halfway by its consumer leaves no connection behind in a broken state; and the
 * streams the read flags (decision 0123: an event that does not simply go on its
 * stream's chain) are read again by name and checked, whatever their names, also
 * with a revision twice once the unique constraint on revisions is gone.
 */
import { randomUUID } from 'node:crypto';
import { to as copyTo } from 'pg-copy-streams';
import { extendLogCheckpoints, followLogChains, PostgresEventStore, verifyEventLog } from '#event-store';
import { BinaryCopyRows, readBinaryCopy } from '#platform/database';
import { visibleHead } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { intBelow, seededRandom } from '../support/test-seed';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

interface Decoded {
  label: string | null;
  small: string | null;
  big: string;
  xid: string;
  bytes: string | null;
}

/** A row of the values statement below, as the test reads it from BinaryCopyRows. */
function decoded(rows: BinaryCopyRows): Decoded {
  const small = rows.starts[1]! < 0 ? null : rows.safeInteger(1);
  return {
    label: rows.text(0),
    small: small === null ? null : String(small),
    big: rows.integerText(2, false),
    xid: rows.integerText(3, true),
    bytes: rows.starts[4]! < 0 ? null : rows.bytes.toString('hex', rows.starts[4]!, rows.ends[4]!),
  };
}

/** Values PostgreSQL sends in the binary format: texts with every character COPY's text format escapes, NULLs, integers at their limits, bytea. */
const VALUES = `SELECT * FROM (VALUES
  ('plain', 0::bigint, 0::bigint, '0'::xid8, '\\x00ff'::bytea),
  (E'tab\\tnewline\\nback\\\\slash\\rcr', 9007199254740991, 9007199254740993, '9007199254740993'::xid8, ''::bytea),
  ('ünïcödé ✓ 𝄞', -9007199254740991, -9223372036854775808, '18446744073709551615'::xid8, NULL),
  (NULL, NULL, 9223372036854775807, '1'::xid8, '\\xdeadbeef'::bytea),
  ('', 42, -1, '4294967296'::xid8, '\\x01'::bytea)
) AS v(label, small, big, xid, bytes)`;

const EXPECTED: Decoded[] = [
  { label: 'plain', small: '0', big: '0', xid: '0', bytes: '00ff' },
  { label: 'tab\tnewline\nback\\slash\rcr', small: '9007199254740991', big: '9007199254740993', xid: '9007199254740993', bytes: '' },
  { label: 'ünïcödé ✓ 𝄞', small: '-9007199254740991', big: '-9223372036854775808', xid: '18446744073709551615', bytes: null },
  { label: null, small: null, big: '9223372036854775807', xid: '1', bytes: 'deadbeef' },
  { label: '', small: '42', big: '-1', xid: '4294967296', bytes: '01' },
];

/** The raw bytes of COPY ... TO STDOUT (FORMAT binary) of the values statement, as the server sends them. */
async function rawValues(): Promise<Buffer> {
  const client = await db.pool.connect();
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of client.query(copyTo(`COPY (${VALUES}) TO STDOUT (FORMAT binary)`)) as AsyncIterable<Buffer>) chunks.push(chunk);
    return Buffer.concat(chunks);
  } finally {
    client.release();
  }
}

describe("COPY's binary format read back", () => {
  it('reads every value exactly: texts with tabs, newlines and backslashes, NULLs, integers beyond 2^53 and at their limits, bytea', async () => {
    const rows: Decoded[] = [];
    await readBinaryCopy(db.pool, VALUES, 5, (r) => void rows.push(decoded(r)));
    expect(rows).toEqual(EXPECTED);
    // A safe integer only where it is one.
    const unsafe: (number | null)[] = [];
    await readBinaryCopy(db.pool, VALUES, 5, (r) => void unsafe.push(r.safeInteger(2)));
    expect(unsafe).toEqual([0, null, null, null, -1]);
  });

  it('gives the same rows whatever the chunks the stream is cut into (seeded)', async () => {
    const raw = await rawValues();
    // Every single cut, then random cuts into many pieces.
    const cuts: number[][] = Array.from({ length: raw.length + 1 }, (_, at) => [at]);
    const rng = seededRandom('binary copy chunks');
    for (let run = 0; run < 200; run++) {
      cuts.push(Array.from({ length: intBelow(rng, 1, 20) }, () => intBelow(rng, 0, raw.length + 1)).sort((a, b) => a - b));
    }
    for (const at of cuts) {
      const rows = new BinaryCopyRows(5);
      const out: Decoded[] = [];
      let from = 0;
      for (const to of [...at, raw.length]) {
        rows.push(raw.subarray(from, to));
        from = to;
        while (rows.next()) out.push(decoded(rows));
      }
      expect([out, rows.ended, rows.pending]).toEqual([EXPECTED, true, 0]);
    }
  });

  it('refuses what is not the format: another signature, a row of other fields, a stream cut before its trailer', async () => {
    const raw = await rawValues();
    const other = Buffer.from(raw);
    other[0] = 0x51;
    const notCopy = new BinaryCopyRows(5);
    notCopy.push(other);
    expect(() => notCopy.next()).toThrow(/signature/);

    const fewer = new BinaryCopyRows(4);
    fewer.push(raw);
    expect(() => fewer.next()).toThrow(/a row of 5 fields where 4 were expected/);

    const cut = new BinaryCopyRows(5);
    cut.push(raw.subarray(0, raw.length - 3));
    let read = 0;
    while (cut.next()) read += 1;
    expect([read, cut.ended, cut.pending > 0]).toEqual([4, false, true]);
  });
});

describe('the log read in one statement', () => {
  it('verifies the log as it was when its statement started while appends go on, and the next verification sees them', async () => {
    const store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
    try {
      // 8 MB of events: more than the sockets' buffers hold, so the server is still sending when the consumer gives up.
      for (let i = 0; i < 40; i++) {
        await store.appendToStream(`order-${i % 7}-${randomUUID()}`, [{ id: randomUUID(), type: 'Created', data: { i, note: 'ü\t\\' } }]);
      }
      await visibleHead(db.pool, store);
      const before = Number((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
      let appended = 0;
      let appending = true;
      const appends = (async () => {
        while (appending) {
          await store.appendToStream(`late-${randomUUID()}`, [{ id: randomUUID(), type: 'Created', data: { late: appended } }]);
          appended += 1;
        }
      })();
      // Pages of one event, each waiting a little: the appends go on during the read.
      let pages = 0;
      const chains = await followLogChains(db.pool, { pageSize: 1 }, async () => {
        pages += 1;
        await new Promise((resolve) => setTimeout(resolve, 2));
      });
      appending = false;
      await appends;
      expect(appended).toBeGreaterThan(0);
      expect(chains.problems).toEqual([]);
      // It read a fixed set: at least what was visible before it started, and each event once.
      expect(chains.events).toBeGreaterThanOrEqual(before);
      expect(pages).toBe(chains.events);
      expect(chains.events).toBeLessThan(before + appended);

      await visibleHead(db.pool, store);
      const after = await verifyEventLog(db.pool);
      expect(after.problems).toEqual([]);
      expect(after.events).toBe(before + appended);
    } finally {
      await store.close();
    }
  });

  it('leaves a checkpoint recorded during the read (it covers events after the read began) to the next run, which compares it', async () => {
    const store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
    try {
      // A log of its own: the checkpoints cover every event of the database.
      await db.pool.query('TRUNCATE events, event_streams, event_log_checkpoints');
      for (let i = 0; i < 20; i++) await store.appendToStream(`cp-${randomUUID()}`, [{ id: randomUUID(), type: 'Created', data: { i } }]);
      await visibleHead(db.pool, store);
      await extendLogCheckpoints(db.pool, { segmentEvents: 5 });
      let extended = false;
      const during = await verifyEventLog(db.pool, {
        pageSize: 1,
        forward: {
          streamNamePrefix: 'cp-',
          eventType: 'Created',
          onEvents: async () => {
            if (extended) return;
            extended = true;
            for (let i = 0; i < 10; i++) await store.appendToStream(`cp-${randomUUID()}`, [{ id: randomUUID(), type: 'Created', data: { late: i } }]);
            await visibleHead(db.pool, store);
            await extendLogCheckpoints(db.pool, { segmentEvents: 5 });
          },
        },
      });
      expect(extended).toBe(true);
      expect([during.problems, during.events, during.checkpointsCompared]).toEqual([[], 20, 4]);
      const next = await verifyEventLog(db.pool);
      expect([next.problems, next.events, next.checkpointsCompared]).toEqual([[], 30, 6]);
    } finally {
      await store.close();
    }
  });

  it('stopped halfway by its consumer, rejects with its error and leaves the pool usable (the connection of the unfinished COPY is closed)', async () => {
    const store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
    try {
      // 8 MB of events: more than the sockets' buffers hold, so the server is still sending when the consumer gives up.
      for (let i = 0; i < 40; i++)
        await store.appendToStream(`stop-${randomUUID()}`, [{ id: randomUUID(), type: 'Created', data: { i, pad: 'x'.repeat(200_000) } }]);
      await visibleHead(db.pool, store);
      let pages = 0;
      await expect(
        followLogChains(db.pool, { pageSize: 2 }, async () => {
          pages += 1;
          if (pages === 3) throw new Error('the consumer gave up');
        }),
      ).rejects.toThrow('the consumer gave up');
      expect(pages).toBe(3);
      // No session is left in the COPY; the pool answers and a whole verification passes.
      // (The server ends the session when it sees the socket closed: looked at until then, up to 5 s.)
      let copying = '';
      for (let tries = 0; tries < 50 && copying !== '0'; tries++) {
        if (tries > 0) await new Promise((resolve) => setTimeout(resolve, 100));
        copying = (
          await db.pool.query<{ n: string }>(
            `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'COPY (SELECT e.stream_name%' AND pid <> pg_backend_pid()`,
          )
        ).rows[0]!.n;
      }
      expect(copying).toBe('0');
      const report = await verifyEventLog(db.pool);
      expect(report.problems).toEqual([]);
    } finally {
      await store.close();
    }
  });
});

describe('the streams the read flags, checked again', () => {
  it('names a tampered stream whatever characters its name holds, and counts the streams of a log whose first events are gone', async () => {
    const store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
    try {
      await db.pool.query('TRUNCATE events, event_streams, event_log_checkpoints');
      const odd = `it's "odd" \\ {a,b} ü-${randomUUID()}`;
      const plain = `plain-${randomUUID()}`;
      for (let i = 0; i < 3; i++) {
        await store.appendToStream(odd, [{ id: randomUUID(), type: 'Noted', data: { i } }]);
        await store.appendToStream(plain, [{ id: randomUUID(), type: 'Noted', data: { i } }]);
      }
      await visibleHead(db.pool, store);
      expect((await verifyEventLog(db.pool)).problems).toEqual([]);
      const edited = (
        await db.pool.query<{ position: string }>(
          `UPDATE events SET data = jsonb_set(data, '{tampered}', 'true') WHERE stream_name = $1 AND stream_revision = 1
           RETURNING transaction_id::text || '/' || global_position AS position`,
          [odd],
        )
      ).rows[0]!.position;
      await db.pool.query('DELETE FROM events WHERE stream_name = $1 AND stream_revision = 0', [plain]);
      const report = await verifyEventLog(db.pool);
      // The same when no stream's previous revision is remembered for long (each asked of the database).
      expect(await verifyEventLog(db.pool, { recentStreams: 1 })).toEqual(report);
      expect(report.problems.map((p) => [p.kind, p.streamName, p.revision, p.kind === 'data_changed' ? p.position : null])).toEqual([
        ['data_changed', odd, 1n, edited],
        ['event_missing', plain, 0n, null],
      ]);
      expect([report.streams, report.events]).toEqual([2, 5]);
    } finally {
      await store.close();
    }
  });

  it('names a revision written twice (an exact copy later in the log) once the unique constraint on revisions is dropped', async () => {
    const store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
    const client = await db.pool.connect();
    try {
      await db.pool.query('TRUNCATE events, event_streams, event_log_checkpoints');
      const name = `twice-${randomUUID()}`;
      for (let i = 0; i < 3; i++) await store.appendToStream(name, [{ id: randomUUID(), type: 'Noted', data: { i } }]);
      await store.appendToStream(`other-${randomUUID()}`, [{ id: randomUUID(), type: 'Noted', data: {} }]);
      await visibleHead(db.pool, store);
      await client.query('ALTER TABLE events DROP CONSTRAINT events_stream_revision_unique, DROP CONSTRAINT events_event_id_unique');
      // The copy chains from revision 0 exactly as the original does: only the order of the log tells it.
      const copy = (
        await client.query<{ position: string }>(
          `INSERT INTO events (stream_name, stream_revision, event_id, event_type, data, metadata, chain_hash)
           SELECT stream_name, stream_revision, event_id, event_type, data, metadata, chain_hash FROM events WHERE stream_name = $1 AND stream_revision = 1
           RETURNING transaction_id::text || '/' || global_position AS position`,
          [name],
        )
      ).rows[0]!.position;
      await visibleHead(db.pool, store);
      const report = await verifyEventLog(db.pool);
      expect(await verifyEventLog(db.pool, { recentStreams: 1 })).toEqual(report);
      expect(report.problems.map((p) => [p.kind, p.streamName, p.revision, p.position])).toEqual([['order_changed', name, 1n, copy]]);
      expect([report.streams, report.events]).toEqual([2, 5]);
    } finally {
      await client.query('TRUNCATE events, event_streams, event_log_checkpoints');
      await client.query(
        'ALTER TABLE events ADD CONSTRAINT events_stream_revision_unique UNIQUE (stream_name, stream_revision), ADD CONSTRAINT events_event_id_unique UNIQUE (event_id)',
      );
      client.release();
      await store.close();
    }
  });

  it('reports the same whether the previous revisions come from the recent streams or from the database (random tampered logs, seeded)', async () => {
    const store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
    const rng = seededRandom('log read, recent streams or the database');
    try {
      for (let run = 0; run < 6; run++) {
        await db.pool.query('TRUNCATE events, event_streams, event_log_checkpoints');
        const names = Array.from({ length: intBelow(rng, 3, 9) }, (_, s) => `mix-${s}-${randomUUID()}`);
        for (let i = 0; i < 40; i++) {
          await store.appendToStream(names[intBelow(rng, 0, names.length)]!, [{ id: randomUUID(), type: 'Noted', data: { i, run } }]);
        }
        await visibleHead(db.pool, store);
        const pick = async () => {
          const positions = (await db.pool.query<{ global_position: string }>('SELECT global_position FROM events ORDER BY global_position')).rows;
          return positions[intBelow(rng, 0, positions.length)]!.global_position;
        };
        // One to three tamperings of one kind or another.
        for (let t = intBelow(rng, 1, 4); t > 0; t--) {
          const how = intBelow(rng, 0, 3);
          if (how === 0) await db.pool.query(`UPDATE events SET data = jsonb_set(data, '{tampered}', 'true') WHERE global_position = $1`, [await pick()]);
          if (how === 1) await db.pool.query('DELETE FROM events WHERE global_position = $1', [await pick()]);
          if (how === 2) await db.pool.query('UPDATE events SET chain_hash = sha256(chain_hash) WHERE global_position = $1', [await pick()]);
        }
        const withMany = await verifyEventLog(db.pool);
        expect(withMany.problems.length).toBeGreaterThan(0);
        for (const recentStreams of [1, 2]) {
          const withFew = await verifyEventLog(db.pool, { recentStreams });
          expect([withFew.problems, withFew.streams, withFew.events]).toEqual([withMany.problems, withMany.streams, withMany.events]);
        }
      }
    } finally {
      await store.close();
    }
  });
});
