/**
 * The tamper-evident log end to end (docs/audit-log.md): a history made through the
 * gateway (invoices paid, failed, refunded: invoice, refund and ledger streams), the
 * signed checkpoint of GET /admin/v1/audit/checkpoint, and then the events table edited
 * by hand, one kind of tampering at a time: each is found by verifyEventLog and by the
 * `log:verify` process (exit 1), which names the first event changed by stream,
 * revision and position; the untouched log passes (exit 0). Every tampering is undone
 * before the next one.
 */
import { createPublicKey, generateKeyPairSync, randomUUID, verify } from 'node:crypto';
import { describeProblem, eventChainHash, extendLogCheckpoints, LogCheckpoint, LogProblem, PostgresEventStore, verifyEventLog } from '#event-store';
import { loadConfig, ConfigError } from '#payments/composition';
import { startProcess } from '../support/gateway-process';
import { api, expectStatus, InvoiceGateway, Json, Merchant, orderId, poll, startInvoiceGateway } from '../support/merchant-fixtures';

const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const AUDIT_SIGNING_KEY = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
const signatureHolds = (c: Json, key = publicKey) => verify(null, Buffer.from(c.signedText), key, Buffer.from(c.signature, 'base64'));

interface EventRow {
  global_position: string;
  transaction_id: string;
  stream_name: string;
  stream_revision: string;
  event_id: string;
  event_type: string;
  data: string;
  metadata: string;
  chain_hash: Buffer;
  created_at: Date;
}

const COLUMNS =
  'global_position, transaction_id::text AS transaction_id, stream_name, stream_revision, event_id, event_type, data::text AS data, metadata::text AS metadata, chain_hash, created_at';

describe('a tampered event log is found and named', () => {
  let gw: InvoiceGateway;
  let merchant: Merchant;
  let checkpoint: Json;

  const rows = async (where: string, params: unknown[] = []): Promise<EventRow[]> =>
    (await gw.db.pool.query<EventRow>(`SELECT ${COLUMNS} FROM events WHERE ${where} ORDER BY events.transaction_id, events.global_position`, params)).rows;
  const positionOf = (row: EventRow) => `${row.transaction_id}/${row.global_position}`;

  /** Puts rows back as they were: delete the positions and insert the saved rows at them. */
  async function restore(saved: readonly EventRow[]): Promise<void> {
    const client = await gw.db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('DELETE FROM events WHERE global_position = ANY($1::bigint[])', [saved.map((r) => r.global_position)]);
      for (const r of saved) await insertAs(client, r, r);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  }

  /** Inserts `content`'s event at `place`'s position (transaction id and global position). */
  async function insertAs(client: { query: (sql: string, params: unknown[]) => Promise<unknown> }, place: EventRow, content: EventRow): Promise<void> {
    await client.query(
      `INSERT INTO events (global_position, transaction_id, stream_name, stream_revision, event_id, event_type, data, metadata, chain_hash, created_at)
       OVERRIDING SYSTEM VALUE VALUES ($1, $2::text::xid8, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10)`,
      [
        place.global_position,
        place.transaction_id,
        content.stream_name,
        content.stream_revision,
        content.event_id,
        content.event_type,
        content.data,
        content.metadata,
        content.chain_hash,
        content.created_at,
      ],
    );
  }

  /** The events of a stream with at least `n` events (the first found, in log order). */
  async function streamWith(n: number, prefix: string): Promise<EventRow[]> {
    const found = await gw.db.pool.query<{ stream_name: string }>(
      `SELECT stream_name FROM events WHERE stream_name LIKE $1 GROUP BY stream_name HAVING count(*) >= $2 ORDER BY min(global_position) LIMIT 1`,
      [`${prefix}%`, n],
    );
    expect(found.rows).toHaveLength(1);
    return (await rows('stream_name = $1', [found.rows[0]!.stream_name])).sort((a, b) => Number(a.stream_revision) - Number(b.stream_revision));
  }

  async function problems(): Promise<LogProblem[]> {
    return [...(await verifyEventLog(gw.db.pool)).problems];
  }

  async function logVerify(args: string[] = []): Promise<{ code: number | string; output: string }> {
    const run = startProcess('log-verify', { DATABASE_URL: gw.db.url }, args);
    const code = await run.exited;
    return { code, output: run.output() };
  }

  const named = (row: EventRow) => ({ streamName: row.stream_name, revision: BigInt(row.stream_revision), position: positionOf(row) });

  beforeAll(async () => {
    // CLOCK=manual: the refund's processing (REFUND_PROCESSING_SECONDS, 10 s by default) passes on the operator's clock.
    // AUDIT_SIGNING_KEY: the test checks signatures against the public half of a key of its own.
    gw = await startInvoiceGateway({ CLOCK: 'manual', AUDIT_SIGNING_KEY });
    merchant = await gw.operator.merchant({ holdHours: 0 });
    const invoices: Json[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await merchant.test.post('/v1/invoices', { orderId: orderId(), amount: `${1000 + i * 100}.00`, method: 'sbp' });
      expectStatus(r, 201);
      invoices.push(r.body);
    }
    for (const invoice of invoices.slice(0, 3)) expectStatus(await gw.operator.payment(invoice.id, 'paid'), 200);
    expectStatus(await gw.operator.payment(invoices[3].id, 'failed'), 200);
    await poll(
      async () => (await merchant.test.get('/v1/balance')).body,
      (b) => b.available !== '0.00',
      'the payments to reach the balance',
    );
    const refund = await merchant.test.post(`/v1/invoices/${invoices[0].id}/refund`, { amount: '100.00' });
    expectStatus(refund, 202);
    await gw.operator.advance(11);
    // Until the invoice's own stream has the refund too (InvoiceRefunded follows RefundSucceeded, a step later): the
    // cases below edit that stream's last event and need it inside the checkpoint the first case records.
    await poll(
      () => rows(`event_type = 'InvoiceRefunded'`),
      (r) => r.length === 1,
      'the refund to reach the invoice',
    );
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('GET /admin/v1/audit/checkpoint: operator only, signed with AUDIT_SIGNING_KEY (Ed25519), moves with the log, and log:verify reproduces it', async () => {
    expect((await api(gw.baseUrl).get('/admin/v1/audit/checkpoint')).status).toBe(401);
    expect((await merchant.test.get('/admin/v1/audit/checkpoint')).status).toBe(401);
    const first = await gw.operator.http.get('/admin/v1/audit/checkpoint');
    expectStatus(first, 200);
    expect(Object.keys(first.body).sort()).toEqual(['algorithm', 'events', 'hash', 'kid', 'position', 'signature', 'signedText']);
    const keys = (await api(gw.baseUrl).get('/v1/audit/keys')).body.keys;
    expect(keys).toEqual([expect.objectContaining({ kid: first.body.kid, alg: 'Ed25519', validUntil: null })]);
    expect(createPublicKey(keys[0].publicKey).equals(publicKey)).toBe(true);
    expect(first.body).toMatchObject({
      algorithm: 'Ed25519',
      position: expect.stringMatching(/^\d+\/\d+$/),
      hash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(first.body.signedText).toBe(`gateway-log-checkpoint-v1\n${first.body.position}\n${first.body.events}\n${first.body.hash}`);
    expect(signatureHolds(first.body)).toBe(true);
    expect(signatureHolds(first.body, generateKeyPairSync('ed25519').publicKey)).toBe(false);
    expect(first.body.events).toBeGreaterThan(0);

    const more = await merchant.test.post('/v1/invoices', { orderId: orderId(), amount: '777.00', method: 'sbp' });
    expectStatus(more, 201);
    // Everything written so far (the new invoice last): the checkpoint must reach it, not only grow.
    const last = (
      await gw.db.pool.query<{ commit: string; prepare: string }>(
        'SELECT transaction_id::text AS commit, global_position::text AS prepare FROM events ORDER BY transaction_id DESC, global_position DESC LIMIT 1',
      )
    ).rows[0]!;
    const covers = (position: string) => {
      const [commit, prepare] = position.split('/').map(BigInt) as [bigint, bigint];
      const [lastCommit, lastPrepare] = [BigInt(last.commit), BigInt(last.prepare)];
      return commit > lastCommit || (commit === lastCommit && prepare >= lastPrepare);
    };
    checkpoint = (
      await poll(
        () => gw.operator.http.get('/admin/v1/audit/checkpoint'),
        (r) => covers(r.body.position),
        'the checkpoint to cover the new invoice',
        60_000, // the visible horizon is the cluster's: other test files' transactions may hold it back a while
      )
    ).body;
    expect(checkpoint.hash).not.toBe(first.body.hash);
    expect(signatureHolds(checkpoint)).toBe(true);

    // The gateway stops: from here on only the test writes the log.
    await gw.gateway.kill();
    const ok = await logVerify(['--expect', first.body.position, first.body.hash, '--expect', checkpoint.position, checkpoint.hash]);
    expect({ code: ok.code, output: ok.output }).toEqual({ code: 0, output: expect.stringContaining('OK: every stream chain recomputes') });
    expect(ok.output).toContain(`off-site checkpoint at position ${checkpoint.position} (${checkpoint.events} events) reproduced`);
    const wrong = await logVerify(['--expect', checkpoint.position, 'ab'.repeat(32)]);
    expect(wrong.code).toBe(1);
    // Two hashes for one position cannot both hold: each is checked, the genuine one given last too.
    const both = await logVerify(['--expect', checkpoint.position, 'ab'.repeat(32), '--expect', checkpoint.position, checkpoint.hash]);
    expect(both).toEqual({
      code: 1,
      output: expect.stringContaining(`FAILED: at position ${checkpoint.position} the log gives running hash ${checkpoint.hash}`),
    });
    expect(both.output).toContain(`off-site checkpoint at position ${checkpoint.position} (${checkpoint.events} events) reproduced`);
    expect(both.output).not.toMatch(/^OK/m);
  });

  it('an untouched log passes', async () => {
    expect(await problems()).toEqual([]);
  });

  it("one event's data edited: data_changed, named", async () => {
    const invoice = await streamWith(3, 'invoice-');
    const target = invoice[1]!;
    await gw.db.pool.query(`UPDATE events SET data = jsonb_set(data, '{tampered}', 'true') WHERE global_position = $1`, [target.global_position]);
    try {
      const found = await problems();
      expect(found[0]).toMatchObject({ kind: 'data_changed', ...named(target) });
      const run = await logVerify();
      expect(run.code).toBe(1);
      expect(run.output).toContain(`  ${describeProblem(found[0]!)}`);
      expect(run.output).toContain(`[data_changed] ${target.stream_name} revision ${target.stream_revision} at position ${positionOf(target)}`);
      // ledger:verify runs the same check: its ledgers agree, the log's chain does not.
      const ledgerVerify = startProcess('ledger-verify', { DATABASE_URL: gw.db.url });
      expect(await ledgerVerify.exited).toBe(1);
      expect(ledgerVerify.output()).toContain('OK: every entry balances');
      expect(ledgerVerify.output()).toContain(`[data_changed] ${target.stream_name} revision ${target.stream_revision} at position ${positionOf(target)}`);
    } finally {
      await restore([target]);
    }
    expect(await problems()).toEqual([]);
  });

  it('one event deleted from the middle of a stream: event_missing, named', async () => {
    const ledger = await streamWith(3, 'ledger-');
    const target = ledger[1]!;
    await gw.db.pool.query('DELETE FROM events WHERE global_position = $1', [target.global_position]);
    try {
      const found = await problems();
      expect(found[0]!.kind).toBe('event_missing');
      expect(found).toContainEqual(
        expect.objectContaining({ kind: 'event_missing', streamName: target.stream_name, revision: BigInt(target.stream_revision) }),
      );
      const run = await logVerify();
      expect(run.code).toBe(1);
      expect(run.output).toContain(`[event_missing] ${target.stream_name} revision ${target.stream_revision}`);
    } finally {
      await restore([target]);
    }
    expect(await problems()).toEqual([]);
  });

  it("a stream's last event deleted: event_missing, named by the stream head", async () => {
    const invoice = await streamWith(2, 'invoice-');
    const target = invoice[invoice.length - 1]!;
    await gw.db.pool.query('DELETE FROM events WHERE global_position = $1', [target.global_position]);
    try {
      const found = await problems();
      expect(found).toContainEqual(
        expect.objectContaining({ kind: 'event_missing', streamName: target.stream_name, revision: BigInt(target.stream_revision) }),
      );
      expect(found[0]!.kind).toBe('event_missing');
    } finally {
      await restore([target]);
    }
    expect(await problems()).toEqual([]);
  });

  /**
   * Deletes the last `n` events of the log, as a tamperer would: each stream row set back
   * to its last remaining event (or removed); the recorded checkpoints first extended over
   * the whole log (as GET /admin/v1/audit/checkpoint does). `restore` puts it all back.
   */
  async function cutTail(n: number): Promise<{ covered: LogCheckpoint; before: EventRow; restore: () => Promise<void> }> {
    const pool = gw.db.pool;
    // events.transaction_id: the xid8, not the text COLUMNS names it by (which orders 999 after 1000).
    const newestFirst = `SELECT ${COLUMNS} FROM events ORDER BY events.transaction_id DESC, events.global_position DESC`;
    const tail = (await pool.query<EventRow>(`${newestFirst} LIMIT ${n}`)).rows.reverse();
    const before = (await pool.query<EventRow>(`${newestFirst} OFFSET ${n} LIMIT 1`)).rows[0]!;
    const covered = await extendLogCheckpoints(pool);
    expect(covered.position).toBe(positionOf(tail[n - 1]!));
    const names = [...new Set(tail.map((r) => r.stream_name))];
    const heads = (
      await pool.query<{ stream_name: string; revision: string; chain_hashes: Buffer[] }>(
        'SELECT stream_name, revision::text AS revision, chain_hashes FROM event_streams WHERE stream_name = ANY($1)',
        [names],
      )
    ).rows;
    await pool.query('DELETE FROM events WHERE global_position = ANY($1::bigint[])', [tail.map((r) => r.global_position)]);
    await pool.query('DELETE FROM event_streams s WHERE stream_name = ANY($1) AND NOT EXISTS (SELECT 1 FROM events e WHERE e.stream_name = s.stream_name)', [
      names,
    ]);
    await pool.query(
      `UPDATE event_streams s SET revision = m.revision, chain_hashes = ARRAY[m.chain_hash]
         FROM (SELECT DISTINCT ON (stream_name) stream_name, stream_revision AS revision, chain_hash FROM events
                WHERE stream_name = ANY($1) ORDER BY stream_name, stream_revision DESC) m
        WHERE m.stream_name = s.stream_name`,
      [names],
    );
    const restore = async () => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query('DELETE FROM event_streams WHERE stream_name = ANY($1)', [names]);
        for (const h of heads) {
          await client.query('INSERT INTO event_streams (stream_name, revision, chain_hashes) VALUES ($1, $2, $3)', [
            h.stream_name,
            h.revision,
            h.chain_hashes,
          ]);
        }
        for (const r of tail) await insertAs(client, r, r);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    };
    return { covered, before, restore };
  }

  it('the last events of the log deleted, stream rows set back, the recorded checkpoint kept: event_missing says how many', async () => {
    const { covered, before, restore } = await cutTail(3);
    try {
      const events = Number(covered.events);
      const found = await problems();
      // The first names the first event gone and the last event the log still has; the checkpoints (a range each) count what is gone.
      expect(found[0]).toEqual({ kind: 'event_missing', streamName: null, revision: null, position: positionOf(before), detail: expect.any(String) });
      expect(found[0]!.detail).toMatch(
        new RegExp(`^\\d event\\(s\\) checkpoint \\d+ recorded are not in the log, events ${events - 2} to \\d+ \\(the last with chain hash [0-9a-f]{16}\\): `),
      );
      expect(found[0]!.detail).toContain(
        `its range ends at event ${events - 3}, ${before.stream_name} revision ${before.stream_revision} (position ${positionOf(before)})`,
      );
      const gone = found.filter((p) => p.kind === 'event_missing').map((p) => Number(/^(\d+) event\(s\) checkpoint/.exec(p.detail)?.[1]));
      expect(gone.reduce((a, b) => a + b, 0)).toBe(3);
      const run = await logVerify();
      expect(run.code).toBe(1);
      expect(run.output).toContain(`  [event_missing] at position ${positionOf(before)}: ${gone[0]} event(s) checkpoint`);
      expect(run.output).not.toMatch(/\] {2}/);
    } finally {
      await restore();
    }
    expect(await problems()).toEqual([]);
  });

  it('the last events deleted across checkpoints of two events each: the first line gives how many are gone in all, no checkpoint "starts after"', async () => {
    // The gateway is stopped: events appended by the test, one at a time (each its own transaction).
    const store = new PostgresEventStore(gw.db.pool);
    try {
      for (let i = 0; i < 6; i++) await store.appendToStream(`audit-cut-${randomUUID()}`, [{ id: randomUUID(), type: 'Probed', data: { n: i } }]);
    } finally {
      await store.close();
    }
    const count = async () => BigInt((await gw.db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
    // Recorded in segments of two events (the checkpoint route records up to CHECKPOINT_SEGMENT_EVENTS per row).
    await poll(
      async () => (await extendLogCheckpoints(gw.db.pool, { segmentEvents: 2 })).events === (await count()),
      (done) => done,
      'the checkpoints to cover the log',
    );
    // Five events, or four where five would start the cut at a segment's start: it ends a range early, then two ranges gone.
    const starts = (await gw.db.pool.query<{ from_events: string }>('SELECT from_events::text FROM event_log_checkpoints')).rows.map((r) =>
      BigInt(r.from_events),
    );
    const total = await count();
    const n = starts.includes(total - 5n) ? 4 : 5;
    expect(starts.filter((start) => start > total - BigInt(n)).length).toBeGreaterThanOrEqual(2);
    const { covered, before, restore } = await cutTail(n);
    try {
      const found = await problems();
      expect(found.filter((p) => p.detail.includes('starts after'))).toEqual([]);
      expect(found[0]).toEqual({ kind: 'event_missing', streamName: null, revision: null, position: positionOf(before), detail: expect.any(String) });
      expect(found[0]!.detail).toMatch(
        new RegExp(`; ${n} recorded event\\(s\\) are gone in all, events ${covered.events - BigInt(n) + 1n} to ${covered.events}$`),
      );
      const lines = found.map((p) => /^(\d+) event\(s\) checkpoint \d+ recorded are not in the log, events/.exec(p.detail));
      expect(lines.every((l) => l !== null)).toBe(true);
      expect(lines.reduce((a, l) => a + Number(l![1]), 0)).toBe(n);
      const run = await logVerify();
      expect(run.code).toBe(1);
      expect(run.output).toContain(`  [event_missing] at position ${positionOf(before)}: `);
      expect(run.output).toContain(`${n} recorded event(s) are gone in all`);
      expect(run.output).not.toContain('starts after');
    } finally {
      await restore();
    }
    expect(await problems()).toEqual([]);
  });

  it("the last events deleted and the database's checkpoints emptied: OK, saying what only an off-site checkpoint finds", async () => {
    const { covered, restore } = await cutTail(2);
    const columns = 'seq, from_events, events, position_commit::text AS position_commit, position_prepare, log_hash, event_hashes';
    const recorded = (await gw.db.pool.query<Record<string, unknown>>(`SELECT ${columns} FROM event_log_checkpoints ORDER BY seq`)).rows;
    await gw.db.pool.query('DELETE FROM event_log_checkpoints');
    const notChecked =
      "not checked: a log rewritten or cut together with the database's own checkpoints is found only against a checkpoint kept off-site (log:verify --checkpoint or --expect)";
    try {
      expect(await problems()).toEqual([]);
      const ok = await logVerify();
      expect(ok.code).toBe(0);
      expect(ok.output).toContain('OK: every stream chain recomputes from its events, every stream head matches, every recorded checkpoint is reproduced.');
      expect(ok.output).toContain(notChecked);
      // The off-site record finds it, and the line is not printed.
      const offSite = await logVerify(['--expect', covered.position, covered.hash.toString('hex')]);
      expect(offSite.code).toBe(1);
      expect(offSite.output).not.toContain(notChecked);
    } finally {
      await restore();
      for (const r of recorded) {
        await gw.db.pool.query(
          `INSERT INTO event_log_checkpoints (seq, from_events, events, position_commit, position_prepare, log_hash, event_hashes)
           VALUES ($1, $2, $3, $4::text::xid8, $5, $6, $7)`,
          [r.seq, r.from_events, r.events, r.position_commit, r.position_prepare, r.log_hash, r.event_hashes],
        );
      }
    }
    expect(await problems()).toEqual([]);
  });

  it('the data of two events of one stream swapped: order_changed, both named', async () => {
    const ledger = await streamWith(3, 'ledger-');
    const [a, b] = [ledger[0]!, ledger[2]!];
    await gw.db.pool.query(`UPDATE events SET data = CASE WHEN global_position = $1 THEN $4::jsonb ELSE $3::jsonb END WHERE global_position IN ($1, $2)`, [
      a.global_position,
      b.global_position,
      a.data,
      b.data,
    ]);
    try {
      const found = await problems();
      expect(found).toEqual([
        {
          kind: 'order_changed',
          ...named(a),
          detail: `revisions ${a.stream_revision} (position ${positionOf(a)}) and ${b.stream_revision} (position ${positionOf(b)}) hold each other's data`,
        },
      ]);
      const run = await logVerify();
      expect(run.code).toBe(1);
      expect(run.output).toContain(`[order_changed] ${a.stream_name} revision ${a.stream_revision} at position ${positionOf(a)}`);
    } finally {
      await restore([a, b]);
    }
    expect(await problems()).toEqual([]);
  });

  it('two events of one stream swapped whole (each at the other revision): order_changed', async () => {
    const ledger = await streamWith(3, 'ledger-');
    const [a, b] = [ledger[1]!, ledger[2]!];
    await swapContent(a, b, { keepRevisions: true });
    try {
      const found = await problems();
      expect(found[0]).toMatchObject({ kind: 'order_changed', ...named(a), detail: expect.stringContaining("hold each other's events") });
    } finally {
      await restore([a, b]);
    }
    expect(await problems()).toEqual([]);
  });

  it('two events of one stream swapped in the log (positions exchanged): order_changed, named', async () => {
    const invoice = await streamWith(3, 'invoice-');
    const [a, b] = [invoice[0]!, invoice[2]!];
    await swapContent(a, b, { keepRevisions: false });
    try {
      const found = await problems();
      expect(found[0]!.kind).toBe('order_changed');
      expect(found).toContainEqual(
        expect.objectContaining({ kind: 'order_changed', streamName: a.stream_name, revision: BigInt(a.stream_revision), position: positionOf(b) }),
      );
      const run = await logVerify();
      expect(run.code).toBe(1);
      expect(run.output).toContain(`[order_changed] ${a.stream_name} revision ${a.stream_revision} at position ${positionOf(b)}`);
    } finally {
      await restore([a, b]);
    }
    expect(await problems()).toEqual([]);
  });

  it('two events of different streams swapped in the log: order_changed, named from the checkpoint', async () => {
    const all = await rows(`true`);
    // Two events of different streams inside one checkpoint's segment (a checkpoint names a
    // moved event within its own range): the segment's first event and a later one.
    const segments = (await gw.db.pool.query<{ event_hashes: Buffer }>('SELECT event_hashes FROM event_log_checkpoints ORDER BY seq')).rows;
    const pairs = segments.flatMap(({ event_hashes: segment }) => {
      const members = all.filter((r) => {
        const at = segment.indexOf(r.chain_hash);
        return at >= 0 && at % 32 === 0;
      });
      const first = members[0];
      const other = members.find((r) => first && r.stream_name !== first.stream_name);
      return first && other ? [[first, other] as const] : [];
    });
    expect(pairs.length).toBeGreaterThan(0);
    const [a, b] = pairs[0]!;
    await swapContent(a, b, { keepRevisions: false });
    try {
      const found = await problems();
      expect(found[0]).toMatchObject({ kind: 'order_changed', streamName: b.stream_name, revision: BigInt(b.stream_revision), position: positionOf(a) });
      expect(found).toContainEqual(
        expect.objectContaining({
          kind: 'order_changed',
          ...named(b),
          position: positionOf(a),
          detail: expect.stringMatching(/^checkpoint \d+ recorded it as event \d+ of the log; it is now event \d+$/),
        }),
      );
    } finally {
      await restore([a, b]);
    }
    expect(await problems()).toEqual([]);
  });

  it('an event edited and its chain hash recomputed (stream head too): chain_hash_mismatch against the recorded checkpoint, named', async () => {
    const invoice = await streamWith(2, 'invoice-');
    const target = invoice[invoice.length - 1]!;
    const previous = invoice[invoice.length - 2]!;
    expect(target.event_type).toBe('InvoiceRefunded');
    expect(BigInt(target.transaction_id) <= BigInt(String(checkpoint.position).split('/')[0])).toBe(true); // recorded before the edit
    await gw.db.pool.query(`UPDATE events SET data = jsonb_set(data, '{tampered}', 'true') WHERE global_position = $1`, [target.global_position]);
    const [edited] = await rows('global_position = $1', [target.global_position]);
    const rehashed = eventChainHash(previous.chain_hash, {
      streamName: edited!.stream_name,
      revision: BigInt(edited!.stream_revision),
      id: edited!.event_id,
      type: edited!.event_type,
      dataJson: edited!.data,
      metadataJson: edited!.metadata,
    });
    await gw.db.pool.query('UPDATE events SET chain_hash = $2 WHERE global_position = $1', [target.global_position, rehashed]);
    const head = `UPDATE event_streams SET chain_hashes[cardinality(chain_hashes)] = $2 WHERE stream_name = $1`;
    await gw.db.pool.query(head, [target.stream_name, rehashed]);
    try {
      // The chains hold again: only the checkpoint recorded before the edit finds it, at the event's own place.
      // (A later checkpoint is judged on its own events, from the hash recorded before it: it holds.)
      const found = await problems();
      expect(found.map((p) => p.kind)).not.toContain('event_missing');
      expect(found).toEqual([
        {
          kind: 'chain_hash_mismatch',
          ...named(target),
          detail: expect.stringMatching(
            /^checkpoint \d+ recorded chain hash [0-9a-f]{16} as event \d+ of the log; the event in its place now has chain hash [0-9a-f]{16}/,
          ),
        },
      ]);
      const run = await logVerify();
      expect(run.code).toBe(1);
      expect(run.output).toContain(`[chain_hash_mismatch] ${target.stream_name} revision ${target.stream_revision} at position ${positionOf(target)}`);
    } finally {
      await restore([target]);
      await gw.db.pool.query(head, [target.stream_name, target.chain_hash]);
    }
    expect(await problems()).toEqual([]);
  });

  it("one event's stored chain hash edited: chain_hash_mismatch, named", async () => {
    const invoice = await streamWith(3, 'invoice-');
    const target = invoice[1]!;
    await gw.db.pool.query(`UPDATE events SET chain_hash = sha256(chain_hash) WHERE global_position = $1`, [target.global_position]);
    try {
      const found = await problems();
      expect(found[0]).toMatchObject({ kind: 'chain_hash_mismatch', ...named(target) });
    } finally {
      await restore([target]);
    }
    expect(await problems()).toEqual([]);
  });

  it("a stream's recorded chain head edited (its stream row): chain_hash_mismatch, named by its last event", async () => {
    const invoice = await streamWith(2, 'invoice-');
    const last = invoice[invoice.length - 1]!;
    const edit = `UPDATE event_streams SET chain_hashes[cardinality(chain_hashes)] = sha256(chain_hashes[cardinality(chain_hashes)]) WHERE stream_name = $1`;
    await gw.db.pool.query(edit, [last.stream_name]);
    try {
      expect(await problems()).toEqual([
        {
          kind: 'chain_hash_mismatch',
          ...named(last),
          detail: "the stream's recorded chain head is not its last event's chain hash",
        },
      ]);
    } finally {
      await gw.db.pool.query(`UPDATE event_streams SET chain_hashes[cardinality(chain_hashes)] = $2 WHERE stream_name = $1`, [
        last.stream_name,
        last.chain_hash,
      ]);
    }
    expect(await problems()).toEqual([]);
  });

  it("a stream row's revision moved past its events: event_missing, named by the stream head", async () => {
    const invoice = await streamWith(2, 'invoice-');
    const last = invoice[invoice.length - 1]!;
    await gw.db.pool.query('UPDATE event_streams SET revision = revision + 2 WHERE stream_name = $1', [last.stream_name]);
    try {
      expect(await problems()).toEqual([
        expect.objectContaining({ kind: 'event_missing', streamName: last.stream_name, revision: BigInt(last.stream_revision) + 1n, position: null }),
      ]);
    } finally {
      await gw.db.pool.query('UPDATE event_streams SET revision = revision - 2 WHERE stream_name = $1', [last.stream_name]);
    }
    expect(await problems()).toEqual([]);
  });

  it('appends not yet visible in the log (an older transaction still open) are no problem: their stream heads are looked up', async () => {
    const store = new PostgresEventStore(gw.db.pool);
    const stream = `audit-probe-${randomUUID()}`;
    await store.appendToStream(stream, [{ id: randomUUID(), type: 'Probed', data: { n: 0 } }]);
    const blocker = await gw.db.pool.connect();
    try {
      // An open transaction with a transaction id: the log's visible head stops before every later append.
      await blocker.query('BEGIN');
      await blocker.query('SELECT pg_current_xact_id()');
      await store.appendToStream(stream, [{ id: randomUUID(), type: 'Probed', data: { n: 1 } }]);
      await store.appendToStream(`audit-probe-${randomUUID()}`, [{ id: randomUUID(), type: 'Probed', data: { n: 0 } }]);
      const report = await verifyEventLog(gw.db.pool);
      expect(report.problems).toEqual([]);
      // The stream's second event was beyond the visible head: not in this run's chains.
      const visible = await rows('stream_name = $1', [stream]);
      expect(visible).toHaveLength(2);
      expect(report.head.position).not.toBe(positionOf(visible[1]!));
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
      await store.close();
    }
    expect(await problems()).toEqual([]);
  });

  it('AUDIT_SIGNING_KEY is validated at start (PEM or base64 PKCS#8, Ed25519 only); the HMAC key is refused', () => {
    expect(() => loadConfig({ AUDIT_SIGNING_KEY: 'short' })).toThrow(/AUDIT_SIGNING_KEY must be an Ed25519 private key/);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    expect(() => loadConfig({ AUDIT_SIGNING_KEY: rsa })).toThrow(ConfigError);
    expect(loadConfig({ AUDIT_SIGNING_KEY }).auditSigningKey!.equals(privateKey)).toBe(true);
    const der = privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64');
    expect(loadConfig({ AUDIT_SIGNING_KEY: der }).auditSigningKey!.equals(privateKey)).toBe(true);
    expect(loadConfig({}).auditSigningKey).toBeNull();
    expect(() => loadConfig({ AUDIT_CHECKPOINT_KEY: '5f'.repeat(32) })).toThrow(/AUDIT_CHECKPOINT_KEY is no longer read/);
  });

  /**
   * Exchanges two events between their rows. keepRevisions: each event moves to the
   * other's revision of the stream (a swap inside the stream); otherwise each keeps its
   * stream and revision and only their places in the log are exchanged.
   */
  async function swapContent(a: EventRow, b: EventRow, options: { keepRevisions: boolean }): Promise<void> {
    const client = await gw.db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('DELETE FROM events WHERE global_position = ANY($1::bigint[])', [[a.global_position, b.global_position]]);
      if (options.keepRevisions) {
        // The chain hashes stay where they were: the events moved, not the chain.
        await insertAs(client, a, { ...b, stream_revision: a.stream_revision, chain_hash: a.chain_hash });
        await insertAs(client, b, { ...a, stream_revision: b.stream_revision, chain_hash: b.chain_hash });
      } else {
        await insertAs(client, a, b);
        await insertAs(client, b, a);
      }
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  }
});
