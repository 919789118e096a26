/**
 * An operator's plain-table write whose COMMIT's answer is lost: the commit was made,
 * the connection broke before the gateway heard so. Made for real, as a replica setup
 * can make it: the embedded server is told to wait for a synchronous standby that does
 * not exist, so every commit is flushed locally and then waits (`SyncRep`); the test
 * terminates the gateway session whose write waits there (PostgreSQL: "the transaction
 * has already committed locally") and cancels every other waiter (a cancelled wait lets
 * its commit stand). The setting is reset after each case.
 *
 * - A write that can look whether it happened answers what it made: key rotation (the
 *   new pair's row), account creation (the new id's row), a payout detail (its row), the
 *   clock (the stored offset).
 * - One that cannot (PATCH) answers 503 with the marked message: the change may have
 *   been made, check before repeating (not "nothing was done").
 *
 * This file runs the gateway on an embedded PostgreSQL of its own (DATA_DIR, as
 * `npm start` runs it), since ALTER SYSTEM changes the whole server. CLOCK=manual: the
 * clock case advances it.
 */
import { Client as PgClient } from 'pg';
import { RunningGateway, startGateway, temporaryDataDir } from '../support/gateway-process';
import { api, expectStatus, Json, Operator, poll, Reply, sleep } from '../support/merchant-fixtures';
import { embeddedDatabaseUrl } from '../support/runbooks';
import { formTokenOf, login, request } from '../console/console-fixture';

jest.setTimeout(120_000);

const WAITING = `SELECT pid, query FROM pg_stat_activity WHERE wait_event = 'SyncRep'`;

describe('an operator write whose commit answer is lost', () => {
  const data = temporaryDataDir();
  let gateway: RunningGateway;
  let operator: Operator;
  let su: PgClient;

  beforeAll(async () => {
    gateway = await startGateway('gateway', { DATA_DIR: data.dir, CLOCK: 'manual' });
    operator = new Operator(gateway.baseUrl, gateway.adminToken);
    su = new PgClient({ connectionString: embeddedDatabaseUrl(data.dir), application_name: 'test-commit-in-doubt' });
    await su.connect();
  });
  afterAll(async () => {
    await su?.query('ALTER SYSTEM RESET synchronous_standby_names').catch(() => undefined);
    await su?.query('SELECT pg_reload_conf()').catch(() => undefined);
    await su?.end().catch(() => undefined);
    await gateway?.kill();
    data.remove();
  });

  const rows = async <T extends Json>(sql: string, values: unknown[] = []): Promise<T[]> => (await su.query(sql, values)).rows as T[];

  /**
   * Commits wait in SyncRep (`on`) or not (`off`) from now on: the setting is in force once a commit (of a WAL
   * record: a transactional message) of a session of the test's waits (then cancelled: it stands), or does not.
   */
  const synchronousStandby = async (on: boolean): Promise<void> => {
    await su.query(on ? `ALTER SYSTEM SET synchronous_standby_names = 'commit_in_doubt_ghost'` : 'ALTER SYSTEM RESET synchronous_standby_names');
    await su.query('SELECT pg_reload_conf()');
    const probe = new PgClient({ connectionString: embeddedDatabaseUrl(data.dir), application_name: 'test-commit-probe' });
    await probe.connect();
    try {
      const pid = (await probe.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      for (;;) {
        let done = false;
        const commit = probe.query(`SELECT pg_logical_emit_message(true, 'commit-in-doubt', 'probe')`).then(() => (done = true));
        let waited = false;
        while (!done && !waited) {
          waited = (await rows(`${WAITING} AND pid = $1`, [pid])).length > 0;
          if (!done && !waited) await sleep(10);
        }
        if (waited) await su.query('SELECT pg_cancel_backend($1)', [pid]);
        await commit;
        // Gateway commits caught in the switch-over are let through.
        for (const w of await rows<{ pid: number }>(WAITING)) await su.query('SELECT pg_cancel_backend($1)', [w.pid]);
        if (waited === on) return;
        await sleep(20);
      }
    } finally {
      await probe.end();
    }
  };

  /**
   * Sends the request with every commit waiting; the gateway session that `isTheWrite` picks is terminated while
   * its commit waits, the others' waits cancelled. Answers the reply once it came.
   */
  const withCommitAnswerLost = async <T = Reply>(isTheWrite: (pid: number, query: string) => Promise<boolean>, send: () => Promise<T>): Promise<T> => {
    await synchronousStandby(true);
    try {
      let reply: T | null = null;
      let terminated = false;
      const sent = send().then((r) => (reply = r));
      while (reply === null) {
        for (const w of await rows<{ pid: number; query: string }>(WAITING)) {
          if (!terminated && (await isTheWrite(w.pid, w.query))) {
            terminated = true;
            await su.query('SELECT pg_terminate_backend($1)', [w.pid]);
          } else await su.query('SELECT pg_cancel_backend($1)', [w.pid]);
        }
        await sleep(10);
      }
      await sent;
      expect(terminated).toBe(true);
      return reply as T;
    } finally {
      await synchronousStandby(false);
    }
  };

  /** The session holds a write lock on `table` (its transaction wrote it). */
  const wrote = (table: string) => async (pid: number) =>
    (await rows(`SELECT 1 FROM pg_locks WHERE pid = $1 AND relation = $2::regclass AND mode = 'RowExclusiveLock'`, [pid, table])).length > 0;

  it('key rotation answers the new pair it committed (the old one is revoked, the new one works)', async () => {
    const account = await operator.createAccount();
    const project = await operator.createProject(account);
    const before = project.keys.test.secretKey as string;
    expectStatus(await api(gateway.baseUrl, before).get('/v1/methods'), 200);

    const reply = await withCommitAnswerLost(wrote('api_keys'), () => operator.http.post(`/admin/v1/projects/${project.id}/keys/rotate`, { mode: 'test' }));

    expectStatus(reply, 201);
    expect(reply.body.secretKey).not.toBe(before);
    expectStatus(await api(gateway.baseUrl, reply.body.secretKey as string).get('/v1/methods'), 200);
    expect((await api(gateway.baseUrl, before).get('/v1/methods')).status).toBe(401);
    const live = await rows(`SELECT 1 FROM api_keys WHERE project_id = $1 AND mode = 'test' AND revoked_at IS NULL`, [project.id]);
    expect(live).toHaveLength(1);
  });

  it('an account whose answer was lost is answered (201), and there is one', async () => {
    const name = `ООО Сомнение ${Date.now()}`;
    const reply = await withCommitAnswerLost(
      async (_pid, query) => /INSERT INTO accounts/.test(query),
      () => operator.http.post('/admin/v1/accounts', { name, email: 'doubt@example.com' }),
    );
    expectStatus(reply, 201);
    expect(await rows('SELECT id FROM accounts WHERE name = $1', [name])).toEqual([{ id: reply.body.id }]);
  });

  // It answered the marked 503 telling the operator to check "with a GET", and no operator GET of a detail exists.
  it('a payout detail whose answer was lost is answered as found (200, as adding it again is), and there is one', async () => {
    const account = await operator.createAccount();
    const reply = await withCommitAnswerLost(
      async (_pid, query) => /INSERT INTO payout_addresses/.test(query),
      () => operator.http.post(`/admin/v1/accounts/${account}/payout-addresses`, { method: 'sbp', account: '+79001112233' }),
    );
    expectStatus(reply, 200);
    expect(await rows('SELECT id::int FROM payout_addresses WHERE account_id = $1', [account])).toEqual([{ id: reply.body.id }]);
  });

  it('the clock advance answers 200 when the move committed, and moved once', async () => {
    const offset = async () => Number((await rows<{ offset_ms: string }>('SELECT offset_ms FROM manual_clock'))[0]!.offset_ms);
    await operator.advance(0);
    const before = await offset();

    const reply = await withCommitAnswerLost(
      async (_pid, query) => /UPDATE manual_clock SET offset_ms = offset_ms \+/.test(query),
      () => operator.http.post('/admin/v1/clock/advance', { seconds: 60 }),
    );

    expectStatus(reply, 200);
    expect(await offset()).toBe(before + 60_000);
    // The gateway runs on the moved clock: a read of it is not behind the answer.
    expect((await operator.advance(0)).getTime()).toBeGreaterThanOrEqual(new Date(reply.body.now as string).getTime());
  });

  // It answered the 503 page of a failure before any write ("nothing was done").
  it('a console logout whose answer was lost answers the 503 page saying it may have been done', async () => {
    const cookie = await login(gateway.baseUrl, gateway.adminToken);
    const formToken = formTokenOf((await request(gateway.baseUrl, 'GET', '/admin', { cookie })).html);

    const page = await withCommitAnswerLost(
      async (_pid, query) => /DELETE FROM operator_sessions/.test(query),
      () => request(gateway.baseUrl, 'POST', '/admin/logout', { cookie, form: { formToken } }),
    );

    expect(page.status).toBe(503);
    expect(page.html).toMatch(/могло быть сделано/);
    // It was: the session is closed.
    expect((await request(gateway.baseUrl, 'GET', '/admin', { cookie })).location).toBe('/admin/login');
  });

  it('a PATCH that cannot look answers 503 saying the change may have been made', async () => {
    const project = await operator.createProject(await operator.createAccount());
    const name = `Сомнение ${Date.now()}`;

    const reply = await withCommitAnswerLost(wrote('projects'), () => operator.http.patch(`/admin/v1/projects/${project.id}`, { name }));

    expectStatus(reply, 503);
    expect(reply.body.error.code).toBe('provider_unavailable');
    expect(reply.body.error.message).toMatch(/прервалась во время записи/);
    expect(reply.body.error.message).toMatch(/могло быть сделано/);
    expect(reply.headers.get('retry-after')).toBe('1');
    // It was: the GET the message points to shows it.
    const read = await poll(
      () => operator.http.get(`/admin/v1/projects/${project.id}`),
      (r) => r.body.name === name,
      'the new name',
    );
    expectStatus(read, 200);
  });
});
