/**
 * A keyed request whose gateway dies (SIGKILL) after the refund or payout was
 * granted and before its answer was stored: the retry with the same key, on the
 * restarted gateway, reaches the SAME refund or payout, never a second one. The
 * stored answer is only a cache; what makes the retry safe is that the key names the
 * refund (its id derives from the key) and the payout (the key claims its id).
 *
 * The kill is placed exactly with the real database: a trigger makes the chosen write
 * wait on an advisory lock the test holds; once a gateway connection waits there, the
 * gateway is killed and that connection ended (as the dead process's connections are).
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { expectError, expectStatus, Json, Merchant, Operator, poll, Reply } from '../support/merchant-fixtures';
import { fund, paidInvoice, payoutAddress, PHONE } from '../support/money-out-fixtures';
import { sendRaw } from '../support/signing';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-idempotency-crash-01';
const HOLD_LOCK = 7_420_001;

jest.setTimeout(180_000);

describe('SIGKILL between the grant and the stored answer of a keyed request', () => {
  let db: TestDatabase;
  let gateway: RunningGateway | null = null;
  let holder: Client;

  const start = async () => {
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN });
    return new Operator(gateway.baseUrl, gateway.adminToken);
  };

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    holder = new Client({ connectionString: db.url });
    await holder.connect();
    await db.pool.query(`CREATE FUNCTION hold_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock(${HOLD_LOCK}); RETURN NEW; END $$`);
  });
  afterAll(async () => {
    await gateway?.kill('SIGKILL');
    await holder?.end();
    await db?.drop();
  });

  /** A started gateway's merchant with 3,000.00 live available and a payout address: a 400.00 payout's body to it. */
  const payoutMerchant = async () => {
    const operator = await start();
    const m = await operator.merchant({ holdHours: 0 });
    await fund(operator, m, 'live', ['3000.00']);
    const address = await payoutAddress(operator, m.accountId, { method: 'sbp', account: PHONE });
    return { m, address, body: `{"amount":"400.00","addressId":${address.id}}` };
  };

  const keyedPost = (m: Merchant, mode: 'test' | 'live', path: string, body: string, key: string): Promise<Reply> =>
    sendRaw(gateway!.baseUrl, 'POST', path, {
      headers: { authorization: `Bearer ${m.keys[mode].secretKey}`, 'content-type': 'application/json', 'idempotency-key': key },
      body,
    });

  /**
   * Sends the request with `trigger` holding the write it names, kills the gateway once
   * a connection waits there, ends that connection, lets the write go, restarts.
   */
  async function killWhileHeld(trigger: string, send: () => Promise<Reply>): Promise<Operator> {
    await holder.query('SELECT pg_advisory_lock($1)', [HOLD_LOCK]);
    await db.pool.query(trigger);
    const inFlight = send().catch(() => null);
    const waiting = await poll(
      async () =>
        (
          await db.pool.query<{ pid: number }>(
            `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1 AND pid <> pg_backend_pid()`,
            [HOLD_LOCK],
          )
        ).rows,
      (rows) => rows.length > 0,
      'a gateway write waiting on the test lock',
      30_000,
    );
    await gateway!.kill('SIGKILL');
    expect(await inFlight).toBeNull();
    // The dead process's connections die with it: end the one that waits.
    for (const { pid } of waiting) await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await db.pool.query('DROP TRIGGER hold_for_test ON idempotency_keys').catch(() => undefined);
    await db.pool.query('DROP TRIGGER hold_for_test ON events').catch(() => undefined);
    await holder.query('SELECT pg_advisory_unlock($1)', [HOLD_LOCK]);
    return start();
  }

  const HOLD_ANSWER = `CREATE TRIGGER hold_for_test BEFORE UPDATE ON idempotency_keys FOR EACH ROW
    WHEN (NEW.state = 'completed') EXECUTE FUNCTION hold_for_test()`;
  const HOLD_RESERVATION = `CREATE TRIGGER hold_for_test BEFORE INSERT ON events FOR EACH ROW
    WHEN (NEW.event_type = 'LedgerEntryPosted' AND NEW.data->>'cause' LIKE 'reserve:%') EXECUTE FUNCTION hold_for_test()`;

  const eventsOf = async (stream: string): Promise<Json[]> =>
    (await db.pool.query('SELECT event_type AS type, data FROM events WHERE stream_name = $1 ORDER BY stream_revision', [stream])).rows;
  const reservationsOf = async (accountId: string, mode: string): Promise<string[]> =>
    (
      await db.pool.query<{ cause: string }>(
        `SELECT data->>'cause' AS cause FROM events WHERE stream_name = $1 AND event_type = 'LedgerEntryPosted' AND data->>'cause' LIKE 'reserve:%' ORDER BY global_position`,
        [`ledger-${mode}_${accountId}`],
      )
    ).rows.map((r) => r.cause);

  it.each([
    ['after the refund was reserved and answered, before the answer was stored', HOLD_ANSWER],
    ['after the invoice granted the refund, before the ledger reserved it', HOLD_RESERVATION],
  ])('refund: killed %s; the retry answers the same refund, the only one', async (_, trigger) => {
    let operator = await start();
    const m = await operator.merchant({ holdHours: 0 });
    await fund(operator, m, 'test', ['3000.00']);
    const invoiceId = await paidInvoice(operator, m.test, '1000.00');
    const key = randomUUID();
    const body = '{"amount":"250.00"}';
    const path = `/v1/invoices/${invoiceId}/refund`;

    operator = await killWhileHeld(trigger, () => keyedPost(m, 'test', path, body, key));
    const granted = (await eventsOf(`invoice-${invoiceId}`)).filter((e) => e.type === 'InvoiceRefundRequested');
    expect(granted).toHaveLength(1);

    const retry = await keyedPost(m, 'test', path, body, key);
    expectStatus(retry, 202);
    expect(retry.body.id).toBe(granted[0].data.refundId);
    expect(retry.body.amount).toBe('250.00');
    const again = await keyedPost(m, 'test', path, body, key);
    expect({ status: again.status, body: again.body, replayed: again.headers.get('idempotent-replayed') }).toEqual({
      status: 202,
      body: retry.body,
      replayed: 'true',
    });

    expect((await eventsOf(`invoice-${invoiceId}`)).filter((e) => e.type === 'InvoiceRefundRequested')).toHaveLength(1);
    expect(await reservationsOf(m.accountId, 'test')).toEqual([`reserve:${retry.body.id}`]);
    await gateway!.kill();
    gateway = null;
  });

  it('payout without orderId: killed before its answer was stored; the retry answers the same payout, the only one', async () => {
    const { m, body } = await payoutMerchant();
    const key = randomUUID();

    await killWhileHeld(HOLD_ANSWER, () => keyedPost(m, 'live', '/v1/payouts', body, key));
    const reserved = await reservationsOf(m.accountId, 'live');
    expect(reserved).toHaveLength(1);

    const retry = await keyedPost(m, 'live', '/v1/payouts', body, key);
    expectStatus(retry, 201);
    expect(`reserve:po_${retry.body.id}`).toBe(reserved[0]);
    const again = await keyedPost(m, 'live', '/v1/payouts', body, key);
    expect({ status: again.status, body: again.body }).toEqual({ status: 201, body: retry.body });
    expect(await reservationsOf(m.accountId, 'live')).toEqual(reserved);
    const list = await sendRaw(gateway!.baseUrl, 'GET', '/v1/payouts', { headers: { authorization: `Bearer ${m.keys.live.secretKey}` } });
    expect(list.body.items.map((p: Json) => p.id)).toEqual([retry.body.id]);
    await gateway!.kill();
    gateway = null;
  });
  it('payout killed before its reservation; the retry answers 503; after a key rotation the retry reaches the same payout', async () => {
    const { m, address, body } = await payoutMerchant();
    const key = randomUUID();
    const payoutsRequested = async (): Promise<string[]> =>
      (
        await db.pool.query<{ stream: string }>(`SELECT stream_name AS stream FROM events WHERE event_type = 'PayoutRequested' AND data->>'accountId' = $1`, [
          m.accountId,
        ])
      ).rows.map((r) => r.stream);

    const operator = await killWhileHeld(HOLD_RESERVATION, () => keyedPost(m, 'live', '/v1/payouts', body, key));
    const written = await payoutsRequested();
    expect(written).toHaveLength(1);

    // The retry under the old pair meets a transient failure of its reservation: 503, nothing stored.
    await db.pool.query(`CREATE FUNCTION fail_reserve() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'reservations fail for this test' USING ERRCODE = '57P01'; END $$`);
    await db.pool.query(`CREATE TRIGGER fail_reserve BEFORE INSERT ON events FOR EACH ROW
      WHEN (NEW.event_type = 'LedgerEntryPosted' AND NEW.data->>'cause' LIKE 'reserve:%') EXECUTE FUNCTION fail_reserve()`);
    try {
      expectStatus(await keyedPost(m, 'live', '/v1/payouts', body, key), 503);
    } finally {
      await db.pool.query('DROP TRIGGER fail_reserve ON events');
    }

    // The operator rotates the live pair; the merchant retries under the new one.
    const rotated = await operator.http.post(`/admin/v1/projects/${m.projectId}/keys/rotate`, { mode: 'live' });
    expectStatus(rotated, 201);
    const after = { ...m, keys: { ...m.keys, live: { secretKey: rotated.body.secretKey, publicKey: rotated.body.publicKey } } } as Merchant;
    const retry = await keyedPost(after, 'live', '/v1/payouts', body, key);
    expectStatus(retry, 201);
    expect(await payoutsRequested()).toEqual(written);
    expect(await reservationsOf(m.accountId, 'live')).toEqual([`reserve:po_${retry.body.id}`]);
    // Another request under the key stays refused: the key names the first payout.
    const other = await keyedPost(after, 'live', '/v1/payouts', `{"amount":"300.00","addressId":${address.id}}`, key);
    expectError(other, 409, 'idempotency_key_conflict', 'Idempotency-Key');
    await gateway!.kill();
    gateway = null;
  });
});
