/**
 * Migration payments:0040 gave a payment whose hold was already released the time of the
 * release as `available_at`, where the projection writes the hold's scheduled end. A
 * database upgraded across it failed ledger:verify (entries_differ) and showed
 * availableAt moving after a rebuild. payments:0048 sets those rows to the scheduled end
 * from the log. Here: a hold released an hour after it was due, its row put back as 0040
 * left it, and the gateway started again as `npm start` does.
 */
import { balanceTransactionsMigration } from '#payments/ledger';
import { allMigrations } from '#payments/composition';
import { migrate } from '#platform/database';
import { createTestDatabase } from '../support/test-database';
import { startGateway, startProcess } from '../support/gateway-process';
import { ADMIN_TOKEN, Client, expectStatus, InvoiceGateway, Json, Operator, poll, startInvoiceGateway } from '../support/merchant-fixtures';
import { paidInvoice } from '../support/money-out-fixtures';

jest.setTimeout(180_000);

const SCHEDULED_HOLD_END = 'payments:0048_ledger_scheduled_hold_end';

/** The merchant's payment transaction of `invoiceId` (GET /v1/balance/transactions). */
async function paymentOf(client: Client, invoiceId: string): Promise<Json | undefined> {
  const r = await client.get('/v1/balance/transactions?limit=100&type=payment');
  expectStatus(r, 200);
  return (r.body.items as Json[]).find((t) => t.invoiceId === invoiceId);
}

describe('upgrade across payments:0040 with a hold already released', () => {
  let gw: InvoiceGateway;

  // The hold ends when the test moves the clock.
  beforeAll(async () => (gw = await startInvoiceGateway({ CLOCK: 'manual' })));
  afterAll(async () => gw?.close());

  it('the row gets the scheduled end again: ledger:verify passes and availableAt is the scheduled time', async () => {
    const m = await gw.operator.merchant({ holdHours: 1 });
    const invoiceId = await paidInvoice(gw.operator, m.live, '1000.00');
    const held = await poll(
      () => paymentOf(m.live, invoiceId),
      (t) => t !== undefined,
      'the payment in the transactions',
    );
    const scheduled = held!.availableAt as string;
    // Released an hour after it was due.
    await gw.operator.advance(7200);
    await poll(
      async () => (await gw.db.pool.query(`SELECT 1 FROM ledger_entries WHERE cause = $1`, [`hold_release:${invoiceId}`])).rowCount,
      (n) => n === 1,
      'the hold released in the read model',
    );
    await gw.gateway.kill();

    // The database as 0040 left it, before 0048 was applied.
    const releaseTime = balanceTransactionsMigration.sql.split(';').find((s) => s.includes("'hold_release:'"))!;
    await gw.db.pool.query(releaseTime);
    await gw.db.pool.query('DELETE FROM migrations_applied WHERE id = $1', [SCHEDULED_HOLD_END]);
    const stored = async () =>
      (await gw.db.pool.query<{ at: Date }>(`SELECT available_at AS at FROM ledger_entries WHERE cause = $1`, [`payment:${invoiceId}`])).rows[0]!.at;
    expect((await stored()).getTime()).toBeGreaterThan(Date.parse(scheduled));

    const again = await startGateway('gateway', { DATABASE_URL: gw.db.url, ADMIN_TOKEN, CLOCK: 'manual' });
    try {
      expect((await stored()).toISOString()).toBe(scheduled);
      const verify = startProcess('ledger-verify', { DATABASE_URL: gw.db.url });
      expect({ exit: await verify.exited, output: verify.output() }).toEqual({ exit: 0, output: expect.stringContaining('OK: every entry balances') });
      const operator = new Operator(again.baseUrl, ADMIN_TOKEN);
      const client = operator.clientsOf(m.accountId, m.project, m.keys).live;
      expect((await paymentOf(client, invoiceId))!.availableAt).toBe(scheduled);
      // Set in place: the ledger was not emptied and projected again.
      expect(again.output()).not.toMatch(/"projection":"ledger","msg":"finished the rebuild/);
    } finally {
      await again.kill();
    }
  });
});

/**
 * A log that is not in this database (EventStoreDB): the scheduled end cannot be read in
 * SQL, so the ledger read model is emptied with the rebuild mark and the projector writes
 * it again. The migration alone here, on rows whose events are not in `events`, as there.
 */
it('a released payment whose event is not in the database: the ledger emptied with the rebuild mark', async () => {
  const db = await createTestDatabase({ migrate: false, poolSize: 2 });
  try {
    const index = allMigrations.findIndex((m) => m.id === SCHEDULED_HOLD_END);
    await migrate(db.pool, allMigrations.slice(0, index));
    await db.pool.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position, available_at) VALUES
         (gen_random_uuid(), 'acc', 'live', 0, 'payment_recorded', 'payment:inv', now(), '1/1', now() + interval '2 hours'),
         (gen_random_uuid(), 'acc', 'live', 1, 'hold_released', 'hold_release:inv', now() + interval '2 hours', '2/2', NULL)`,
    );
    await db.pool.query(`INSERT INTO ledger_balances (account_id, mode, account, balance) VALUES ('acc', 'live', 'available', 100)`);
    await db.pool.query(`INSERT INTO projection_checkpoints (projection, commit_position, prepare_position) VALUES ('ledger', 2, 2), ('invoices', 2, 2)`);

    expect(await migrate(db.pool, allMigrations)).toEqual(allMigrations.slice(index).map((m) => m.id));
    const count = async (table: string) => Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]!.n);
    expect({ entries: await count('ledger_entries'), balances: await count('ledger_balances') }).toEqual({ entries: 0, balances: 0 });
    const marks = await db.pool.query(
      `SELECT projection, commit_position::text, rebuild_started_at IS NOT NULL AS marked FROM projection_checkpoints ORDER BY projection`,
    );
    expect(marks.rows).toEqual([
      { projection: 'invoices', commit_position: '2', marked: false },
      { projection: 'ledger', commit_position: '0', marked: true },
    ]);
  } finally {
    await db.drop();
  }
});
