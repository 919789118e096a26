/**
 * docs/operations.md, "What the operator sees": to see other roles' sessions whole in
 * `eventLog.oldestTransaction`, the gateway's role needs `GRANT pg_read_all_stats TO
 * gateway;`; without it such a session shows by its application, database and pid, its
 * state and age unknown, and the metric gives it the age of the oldest event it hides
 * (it reported 0, which the suggested alert on it never sees). Run as a deployment
 * runs: the gateway as an ordinary login role that owns its database (not the superuser
 * the other tests use), another role's session holding a transaction id, then the grant
 * as printed.
 */
import { Client } from 'pg';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { expectStatus, Json, Operator, orderId, poll, sleep } from '../support/merchant-fixtures';
import { docSection, inlineCode, metric } from '../support/runbooks';
import { createTestDatabase, TestDatabase } from '../support/test-database';

// The test calls /health/ready and the operator API with it (a second reader of the same token).
const ADMIN_TOKEN = 'oldest-transaction-grant-operator-token-01';

describe("the oldest transaction of another role's session, with and without the printed grant", () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  let holder: Client | null = null;

  beforeAll(async () => {
    // A server of its own: the test holds a transaction id, which would hold back every other file's log readers.
    db = await createTestDatabase({ ownerRole: true, serverOfItsOwn: true });
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN });
  });
  afterAll(async () => {
    await holder?.end();
    await gateway?.kill();
    await db?.drop();
  });

  const eventLog = async (): Promise<Json> => {
    const r = await fetch(`${gateway.baseUrl}/health/ready`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    return ((await r.json()) as Json).eventLog;
  };

  /** database_oldest_transaction_seconds{application_name="another-role-report"} of /metrics. */
  const oldestTransactionSeconds = async (): Promise<number | undefined> => {
    const r = await fetch(`${gateway.baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    return metric(await r.text(), 'database_oldest_transaction_seconds', { application_name: 'another-role-report' });
  };

  it('without the grant: named, its age unknown and counted from the oldest event it hides; with the grant as printed: whole', async () => {
    const operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    const shop = await operator.merchant();
    expect(db.owner).toBeDefined();
    // The superuser's session (another role, another database of the server), as an operator's psql or a report.
    holder = new Client({ connectionString: db.adminUrl, application_name: 'another-role-report' });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT pg_current_xact_id()');
    expectStatus(await shop.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('grant'), method: 'sbp' }), 201);

    const unnamed = await poll(eventLog, (log) => log?.invisibleEvents >= 1, 'the invoice hidden behind the open transaction');
    expect(unnamed.oldestTransaction).toMatchObject({ applicationName: 'another-role-report', database: 'postgres', state: null, ageSeconds: null });
    await sleep(1_100);
    expect(await oldestTransactionSeconds()).toBeGreaterThanOrEqual(1);

    const grant = inlineCode(docSection('What the operator sees'), 'GRANT pg_read_all_stats');
    expect(grant).toBe('GRANT pg_read_all_stats TO gateway;');
    const admin = new Client({ connectionString: db.adminUrl });
    await admin.connect();
    try {
      await admin.query(grant.replace(' TO gateway;', ` TO ${db.owner};`));
    } finally {
      await admin.end();
    }
    const named = await poll(eventLog, (log) => log?.oldestTransaction?.applicationName === 'another-role-report', 'the open transaction named');
    expect(named.oldestTransaction).toMatchObject({ applicationName: 'another-role-report', database: 'postgres', state: 'idle in transaction' });
    expect(named.oldestTransaction.ageSeconds).toBeGreaterThanOrEqual(1);
    expect(await oldestTransactionSeconds()).toBeGreaterThanOrEqual(1);
    await holder.query('COMMIT');
  });
});
