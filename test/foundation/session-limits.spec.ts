/**
 * The bounds on the gateway's own database sessions (libs/database/src/pool.ts), on
 * the real PostgreSQL: a session left idle inside a transaction is cut (an open
 * transaction holding a transaction id hides every newer event from every
 * subscriber of the cluster), a statement running too long is cancelled, TCP
 * keepalive is on at the server's end, migrations are exempt from the statement
 * bound, and an operator's own `options` in DATABASE_URL still apply.
 */
import { Client, type Pool } from 'pg';
import { COMMAND_SESSION_LIMITS, createPool, migrate, SERVING_SESSION_LIMITS, SessionLimits } from '#platform/database';
import { readLogVisibility } from '#event-store';
import { after, docSection, fencedBlock } from '../support/runbooks';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;
const pools: Pool[] = [];
const pool = (limits?: SessionLimits, url = db.url, applicationName = 'session-limits-test'): Pool => {
  const p = createPool(url, { max: 2, applicationName, limits });
  pools.push(p);
  return p;
};

beforeAll(async () => {
  // A test holds the cluster's horizon: on a server of its own (test/support/test-database.ts says why).
  db = await createTestDatabase({ serverOfItsOwn: true });
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await db.drop();
});

const SETTINGS_SQL = `SELECT current_setting('statement_timeout') AS statement, current_setting('idle_in_transaction_session_timeout') AS idle,
              current_setting('tcp_keepalives_idle') AS keepalive_idle, current_setting('tcp_keepalives_interval') AS keepalive_interval,
              current_setting('tcp_keepalives_count') AS keepalive_count`;
const settings = async (p: Pool) => (await p.query<Record<string, string>>(SETTINGS_SQL)).rows[0];

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what}: not in time`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('session limits of the gateway’s pools', () => {
  it('a serving pool’s sessions: statements cut at 30 s, idle in a transaction cut at 10 s, server-side TCP keepalive 10 s / 5 s × 3', async () => {
    expect(SERVING_SESSION_LIMITS).toEqual({ statementTimeoutMs: 30_000, idleInTransactionTimeoutMs: 10_000 });
    expect(await settings(pool())).toEqual({
      statement: '30s',
      idle: '10s',
      keepalive_idle: '10',
      keepalive_interval: '5',
      keepalive_count: '3',
    });
  });

  it('the operator’s commands: no statement bound, idle in a transaction cut at 60 s', async () => {
    expect(await settings(pool(COMMAND_SESSION_LIMITS))).toMatchObject({ statement: '0', idle: '1min', keepalive_idle: '10' });
  });

  it('a session idle inside a transaction that holds a transaction id is cut, and with it the hold on the visible log', async () => {
    const gateway = pool({ statementTimeoutMs: 30_000, idleInTransactionTimeoutMs: 1000 }, db.url, 'idle-in-transaction-test');
    const observer = pool();
    const client = await gateway.connect();
    let cut: unknown = null;
    try {
      await client.query('BEGIN');
      const { pid } = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid, txid_current()')).rows[0]!;
      // While it is open, it is what the measure of the visible log names (the oldest
      // transaction of this file's own server).
      await until(
        async () => (await readLogVisibility(observer)).oldestTransaction?.applicationName === 'idle-in-transaction-test',
        'the open transaction shown as the oldest of the cluster',
      );
      await until(async () => (await observer.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount === 0, 'the idle session to be cut');
      cut = await client.query('SELECT 1').then(
        () => null,
        (error: Error) => error,
      );
      const oldest = (await readLogVisibility(observer)).oldestTransaction;
      expect(oldest?.pid ?? null).not.toBe(pid);
    } finally {
      client.release(cut instanceof Error ? cut : undefined);
    }
    expect(cut).toBeInstanceOf(Error);
    // The pool goes on with a fresh session.
    expect((await gateway.query('SELECT 1 AS one')).rows[0].one).toBe(1);
  });

  it('a statement running past the statement bound is cancelled (57014); the session stays usable', async () => {
    const p = pool({ statementTimeoutMs: 200, idleInTransactionTimeoutMs: 10_000 });
    const client = await p.connect();
    try {
      await expect(client.query('SELECT pg_sleep(5)')).rejects.toMatchObject({ code: '57014' });
      expect((await client.query('SELECT 1 AS one')).rows[0].one).toBe(1);
    } finally {
      client.release();
    }
  });

  it('options in the database URL are kept and win over the gateway’s', async () => {
    const url = new URL(db.url);
    url.searchParams.set('options', '-c statement_timeout=12345 -c work_mem=8MB');
    const p = pool(undefined, url.toString());
    const r = (
      await p.query<{ statement: string; work_mem: string; idle: string }>(
        `SELECT current_setting('statement_timeout') AS statement, current_setting('work_mem') AS work_mem,
              current_setting('idle_in_transaction_session_timeout') AS idle`,
      )
    ).rows[0]!;
    expect(r).toEqual({ statement: '12345ms', work_mem: '8MB', idle: '10s' });
  });

  it("the doc's example options in the URL apply as printed", async () => {
    const example = /\(`postgres:\/\/…\/gateway\?(options=[^`]+)`\)/.exec(docSection("The gateway's own sessions"))![1]!;
    const url = new URL(db.url);
    url.searchParams.set('options', new URLSearchParams(example).get('options')!);
    expect((await settings(pool(undefined, url.toString()))).statement).toBe('1min');
  });

  // The doc named one of the five settings and left "the four others" to the operator.
  it("behind a pooler that drops startup options, the role settings the doc prints give a session the gateway's own values", async () => {
    const owned = await createTestDatabase({ ownerRole: true });
    try {
      const printed = fencedBlock(after(docSection("The gateway's own sessions"), 'PgBouncer'), 'sql');
      expect(printed.match(/^ALTER ROLE gateway SET /gm)).toHaveLength(5);
      // As its own role, on its own database: the role is the test's (roles are the cluster's).
      await owned.pool.query(printed.replace(/ROLE gateway /g, `ROLE ${owned.owner} `));
      const gatewaySession = await settings(pool(undefined, owned.url));
      // A session opened without the gateway's options, as the pooler opens it.
      const plain = new Client({ connectionString: owned.url });
      await plain.connect();
      try {
        expect((await plain.query<Record<string, string>>(SETTINGS_SQL)).rows[0]).toEqual(gatewaySession);
      } finally {
        await plain.end();
      }
    } finally {
      await owned.drop();
    }
  });

  it('migrations run without the statement bound, and the session gets its bound back', async () => {
    const fresh = await createTestDatabase({ migrate: false });
    try {
      const p = pool({ statementTimeoutMs: 100, idleInTransactionTimeoutMs: 10_000 }, fresh.url);
      const applied = await migrate(p, [{ id: 'test:0001_slow', sql: 'SELECT pg_sleep(0.5); CREATE TABLE slow_one (id int);' }]);
      expect(applied).toEqual(['test:0001_slow']);
      // max 2: both sessions of the pool, including the one that migrated, have the bound.
      const clients = [await p.connect(), await p.connect()];
      try {
        for (const c of clients) expect((await c.query(`SELECT current_setting('statement_timeout') AS s`)).rows[0].s).toBe('100ms');
      } finally {
        for (const c of clients) c.release();
      }
      await p.end();
      pools.splice(pools.indexOf(p), 1);
    } finally {
      await fresh.drop();
    }
  });
});
