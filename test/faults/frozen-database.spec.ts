/**
 * A database server that stops answering without closing anything: a frozen host or
 * VM, here its processes stopped with SIGSTOP (their kernel still acknowledges TCP, so
 * keepalive sees nothing). Before the statement watch every request that reached it
 * waited for good (≥ 200 s: POST, GET and /health/ready alike).
 *
 * - A statement with no answer past its `statement_timeout` and a 5 s margin fails as a
 *   lost connection (a write: outcome unknown), and the pool drops the connection; one
 *   the server cancels answers as before; a queue of short statements is not cut; a
 *   session that lifts its bound (SET [LOCAL] statement_timeout = 0) is not cut at all.
 * - The gateway as `npm start` runs it (embedded server, frozen whole): readiness says
 *   503 within its 5 s, requests answer 503 `provider_unavailable` instead of hanging;
 *   thawed, it serves again without a restart, and a retried create makes one invoice.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import { AppendOutcomeUnknownError, PostgresEventStore } from '#event-store';
import {
  backendOf,
  createPool,
  inTransactionOn,
  isDatabaseNotReached,
  isConnectionLost,
  outcomeOf,
  statementBoundChange,
  statementTimeoutIn,
  WriteOutcomeUnknownError,
} from '#platform/database';
import { RunningGateway, startGateway, temporaryDataDir } from '../support/gateway-process';
import { descendantsOf } from '../support/proc-tree';
import { api, Operator, orderId } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';

jest.setTimeout(180_000);

/** `url` with startup options of its own (as an operator writes them in DATABASE_URL). */
const withOptions = (url: string, options: string) => {
  const u = new URL(url);
  u.searchParams.set('options', options);
  return u.toString();
};

describe('statementTimeoutIn', () => {
  it('reads the last statement_timeout of startup options, with its unit', () => {
    expect(statementTimeoutIn('-c statement_timeout=60000')).toBe(60_000);
    expect(statementTimeoutIn('-c statement_timeout=2s -c lock_timeout=1s')).toBe(2_000);
    expect(statementTimeoutIn('--statement_timeout=1min')).toBe(60_000);
    expect(statementTimeoutIn('--statement-timeout=90s')).toBe(90_000);
    expect(statementTimeoutIn('-c statement_timeout=5s -c statement_timeout=0')).toBe(0);
    expect(statementTimeoutIn('-c lock_timeout=1s')).toBeUndefined();
    expect(statementTimeoutIn('-c statement_timeout=soon')).toBeNull();
  });

  it("follows a session's own SET or RESET of it, only as a statement of its own", () => {
    expect(statementBoundChange('SET statement_timeout = 0')).toEqual({ local: false, ms: 0 });
    expect(statementBoundChange("set local statement_timeout to '5 min';")).toEqual({ local: true, ms: 300_000 });
    expect(statementBoundChange('SET SESSION statement_timeout TO DEFAULT')).toEqual({ local: false, ms: null });
    expect(statementBoundChange('RESET statement_timeout')).toEqual({ local: false, ms: null });
    expect(statementBoundChange('reset all')).toEqual({ local: false, ms: null });
    expect(statementBoundChange("SET statement_timeout = 'soon'")).toEqual({ local: false, ms: NaN });
    for (const other of [
      "SELECT 'SET statement_timeout = 0'",
      'ALTER ROLE gateway SET statement_timeout = 0',
      'SET statement_timeout = 0; SELECT 1',
      'SET lock_timeout = 0',
    ])
      expect(statementBoundChange(other)).toBeNull();
  });
});

describe('a statement the server does not answer', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false, poolSize: 1 });
    await db.pool.query('CREATE TABLE frozen_writes (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await db.drop();
  });

  it('fails as a lost connection after statement_timeout + 5 s, a COMMIT as outcome unknown; the pool drops the connection', async () => {
    // statement_timeout 1 s (the URL's own option, which wins): the watch fires at 6 s, not 35 s.
    const pool = createPool(withOptions(db.url, '-c statement_timeout=1000'), { max: 2, applicationName: 'gateway-test-frozen' });
    const stopped: number[] = [];
    try {
      const client = await pool.connect();
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const pid = rows[0]!.pid;
      let released = false;
      try {
        const write = inTransactionOn(client, async () => {
          // Its work reads only: a transaction id held here for 6 s would hold back the visible log of
          // every other file on the shared test server (their reports wait for it). Its COMMIT is cut all the same.
          await client.query('SELECT count(*) FROM frozen_writes');
          process.kill(pid, 'SIGSTOP');
          stopped.push(pid);
        });
        const error = await write.then(
          () => null,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(WriteOutcomeUnknownError);
        expect(isConnectionLost(error)).toBe(true);
        client.release(error as Error);
        released = true;
      } finally {
        if (!released) client.release();
      }
      // The next statement gets another connection and its answer.
      expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      for (const pid of stopped) process.kill(pid, 'SIGCONT');
      await pool.end();
    }
  });

  it('an append cut so is not answered "nothing written": its server process may still commit it (AppendOutcomeUnknownError)', async () => {
    // Migrated for the event store; one connection, whose server process is stopped before the append is sent to it.
    const own = await createTestDatabase({ poolSize: 1 });
    const pool = createPool(withOptions(own.url, '-c statement_timeout=1000'), { max: 1, applicationName: 'gateway-test-frozen' });
    const store = new PostgresEventStore(pool, { groupAppends: false });
    let pid = 0;
    try {
      pid = (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      process.kill(pid, 'SIGSTOP');
      const stream = `frozen-${randomUUID()}`;
      const error = await store.appendToStream(stream, [{ id: randomUUID(), type: 'Frozen', data: {} }], { expectedRevision: 'no_stream' }).then(
        () => null,
        (e: unknown) => e,
      );
      process.kill(pid, 'SIGCONT');
      pid = 0;
      expect(error).toBeInstanceOf(AppendOutcomeUnknownError);
    } finally {
      if (pid) process.kill(pid, 'SIGCONT');
      await store.close();
      await pool.end();
      await own.drop();
    }
  });

  it("a lost write's process id now another session's (a later process given the same id): that session is not ended", async () => {
    const pool = createPool(db.url, { max: 1, applicationName: 'gateway-test-frozen' });
    const other = new Client({ connectionString: db.url, application_name: 'gateway-test-frozen-other' });
    await other.connect();
    try {
      const pid = (await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const lost = Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
      // The lost write's process, started before the session that now has its id.
      const error = new WriteOutcomeUnknownError(lost, { pid, startedAt: String(Date.parse('2026-01-01T00:00:00Z') * 1000) }, pool);
      // That process is gone: nothing found is final, and the lost connection is thrown.
      await expect(
        outcomeOf(
          () => Promise.reject(error),
          async () => null,
        ),
      ).rejects.toBe(lost);
      expect((await other.query('SELECT 1 AS alive')).rows).toEqual([{ alive: 1 }]);
    } finally {
      await other.end().catch(() => undefined);
      await pool.end();
    }
  });

  it("a lost write's process is ended before nothing found is final, whatever the sessions' DateStyle and TimeZone", async () => {
    // A timestamp's text in these settings ('… IST') reads back as another zone's instant.
    const pool = createPool(withOptions(db.url, '-c DateStyle=SQL,DMY -c TimeZone=Asia/Kolkata'), { max: 2, applicationName: 'gateway-test-frozen' });
    try {
      const writer = await pool.connect();
      const backend = backendOf(writer);
      expect(backend).toEqual({ pid: expect.any(Number), startedAt: expect.stringMatching(/^\d+$/) });
      const lost = Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
      await expect(
        outcomeOf(
          () => Promise.reject(new WriteOutcomeUnknownError(lost, backend, pool)),
          async () => null,
        ),
      ).rejects.toBe(lost);
      // Final only because that process was ended (it could otherwise still commit).
      expect((await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [backend!.pid])).rowCount).toBe(0);
      writer.release(true);
    } finally {
      await pool.end();
    }
  });

  it("a connection's server process is the one the server confirms: a pooler's stand-in id is not, and is never ended", async () => {
    const pool = createPool(db.url, { max: 2, applicationName: 'gateway-test-frozen' });
    try {
      const direct = await pool.connect();
      const pid = (await direct.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      expect(backendOf(direct)).toEqual({ pid, startedAt: expect.any(String) });
      // PgBouncer gives a client a random key where the server's process id would be.
      const options = (pool as unknown as { options: { onConnect: (client: object) => Promise<void> } }).options;
      const confirm = options.onConnect;
      options.onConnect = (client) => confirm(Object.assign(client, { processID: 4242 }));
      const pooled = await pool.connect();
      await pooled.query('SELECT 1');
      expect(backendOf(pooled)).toBeNull();
      direct.release();
      pooled.release();
    } finally {
      await pool.end();
    }
  });

  it("a grouped append cut so is not made again while the group's server process may still commit it: each is unknown", async () => {
    const own = await createTestDatabase({ poolSize: 1 });
    const pool = createPool(withOptions(own.url, '-c statement_timeout=1000'), { max: 1, applicationName: 'gateway-test-frozen' });
    const store = new PostgresEventStore(pool);
    let pid = 0;
    try {
      pid = (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      process.kill(pid, 'SIGSTOP');
      // Two appends of one turn: one group, one statement, sent to the stopped process.
      const outcomes = await Promise.all(
        ['a', 'b'].map((name) =>
          store
            .appendToStream(`frozen-group-${name}-${randomUUID()}`, [{ id: randomUUID(), type: 'Frozen', data: {} }], { expectedRevision: 'no_stream' })
            .then(
              () => 'appended',
              (e: unknown) => (e instanceof AppendOutcomeUnknownError ? 'unknown' : String(e)),
            ),
        ),
      );
      process.kill(pid, 'SIGCONT');
      pid = 0;
      expect(outcomes).toEqual(['unknown', 'unknown']);
    } finally {
      if (pid) process.kill(pid, 'SIGCONT');
      await store.close();
      await pool.end();
      await own.drop();
    }
  });

  it('a new connection whose server process stops before its check: the database not reached (503)', async () => {
    const pool = createPool(db.url, { max: 1, applicationName: 'gateway-test-frozen' });
    const options = (pool as unknown as { options: { onConnect: (client: object) => Promise<void> } }).options;
    const confirm = options.onConnect;
    let pid = 0;
    options.onConnect = (client) => {
      pid = (client as { processID: number }).processID;
      process.kill(pid, 'SIGSTOP');
      return confirm(client);
    };
    try {
      const error = await pool.connect().then(
        () => null,
        (e: unknown) => e,
      );
      expect(isDatabaseNotReached(error)).toBe(true);
    } finally {
      if (pid) process.kill(pid, 'SIGCONT');
      await pool.end();
    }
  });

  it('a statement the server cancels answers its own error; a queue of short ones outlasting the bound is not cut', async () => {
    const pool = createPool(withOptions(db.url, '-c statement_timeout=1000'), { max: 1, applicationName: 'gateway-test-frozen' });
    try {
      await expect(pool.query('SELECT pg_sleep(3)')).rejects.toMatchObject({ code: '57014' });
      const client = await pool.connect();
      try {
        // 16 × 0.4 s queued on one connection: 6.4 s busy, each statement well inside 1 s.
        const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => client.query('SELECT pg_sleep(0.4), $1::int AS i', [i])));
        expect(answers.map((a) => a.rows[0].i)).toEqual(Array.from({ length: 16 }, (_, i) => i));
      } finally {
        client.release();
      }
    } finally {
      await pool.end();
    }
  });
});

describe("a session that lifts its own bound (migrations, index builds) is not cut at the pool's", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false, poolSize: 1 });
  });
  afterAll(async () => {
    await db.drop();
  });

  it('SET statement_timeout = 0 and SET LOCAL in a transaction: a 7 s statement runs to its end; RESET bounds it again', async () => {
    // The pool's bound 1 s (watched at 6 s): each session below lifts it, as migrate() and restoreDeferredIndexes() do.
    const pool = createPool(withOptions(db.url, '-c statement_timeout=1000'), { max: 2, applicationName: 'gateway-test-frozen' });
    try {
      const [session, local] = await Promise.all([pool.connect(), pool.connect()]);
      try {
        const lifted = (async () => {
          await session.query('SET statement_timeout = 0');
          const { rows } = await session.query('SELECT pg_sleep(7), 1 AS done');
          await session.query('RESET statement_timeout');
          await expect(session.query('SELECT pg_sleep(3)')).rejects.toMatchObject({ code: '57014' });
          return rows[0].done;
        })();
        const inTransaction = inTransactionOn(local, async () => {
          await local.query('SET LOCAL statement_timeout = 0');
          return (await local.query('SELECT pg_sleep(7), 2 AS done')).rows[0].done;
        });
        expect(await Promise.all([lifted, inTransaction])).toEqual([1, 2]);
      } finally {
        session.release();
        local.release();
      }
    } finally {
      await pool.end();
    }
  });
});

describe('the gateway on a frozen embedded server', () => {
  const data = temporaryDataDir();
  let gateway: RunningGateway;
  let frozen: number[] = [];

  beforeAll(async () => {
    gateway = await startGateway('gateway', { DATA_DIR: data.dir });
  });
  afterAll(async () => {
    for (const pid of frozen) process.kill(pid, 'SIGCONT');
    await gateway?.kill();
    data.remove();
  });

  it('answers 503 instead of waiting, is ready again once thawed, and a retried create makes one invoice', async () => {
    const operator = new Operator(gateway.baseUrl, gateway.adminToken);
    const merchant = await operator.merchant();
    const created = await merchant.test.post('/v1/invoices', { amount: '100.00', orderId: orderId() });
    expect(created.status).toBe(201);

    const postmaster = Number(readFileSync(path.join(data.dir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
    frozen = [postmaster, ...descendantsOf(postmaster)];
    for (const pid of frozen) process.kill(pid, 'SIGSTOP');

    const order = orderId('frozen');
    // A client's patience, well past the bounds (readiness 5 s, a statement 35 s and its look after).
    const ask = (pathname: string, init: RequestInit = {}) =>
      fetch(`${gateway.baseUrl}${pathname}`, { ...init, signal: AbortSignal.timeout(150_000) }).then(async (r) => ({ status: r.status, body: await r.json() }));
    const auth = { authorization: `Bearer ${merchant.keys.test.secretKey}` };
    const [ready, post, get] = await Promise.all([
      ask('/health/ready'),
      ask('/v1/invoices', {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ amount: '100.00', orderId: order }),
      }),
      ask(`/v1/invoices/${created.body.id}`, { headers: auth }),
    ]);
    expect(ready).toEqual({ status: 503, body: { status: 'not_ready' } });
    expect(post).toMatchObject({ status: 503, body: { error: { code: 'provider_unavailable' } } });
    expect(get).toMatchObject({ status: 503, body: { error: { code: 'provider_unavailable' } } });

    for (const pid of frozen) process.kill(pid, 'SIGCONT');
    frozen = [];
    expect((await ask('/health/ready')).status).toBe(200);
    const retried = await merchant.test.post('/v1/invoices', { amount: '100.00', orderId: order });
    expect([200, 201]).toContain(retried.status);
    const again = await merchant.test.post('/v1/invoices', { amount: '100.00', orderId: order });
    expect({ status: again.status, id: again.body.id }).toEqual({ status: 200, id: retried.body.id });
    expect((await api(gateway.baseUrl, merchant.keys.test.secretKey).get(`/v1/invoices/${created.body.id}`)).status).toBe(200);
  });
});
