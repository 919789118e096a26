/**
 * A finance figure for a past instant never changes afterwards (docs/finance-reports.md,
 * "Periods and instants"). A reactor posts a flow's ledger entry with its event's time,
 * after it: here the payment's entry, held up by the ledger stream's append lock, as a
 * busy or restarted projector holds it up. A report as of an instant after the payment
 * waits for that entry instead of answering without it (and otherwise answering again
 * with it later); a follower that does not reach the log's head within the wait (a
 * projector stopped) makes it 503 with Retry-After.
 */
import { randomUUID } from 'node:crypto';
import { STREAM_APPEND_LOCK_NAMESPACE } from '#event-store/postgres';
import { advanceCheckpoint, ensureCheckpoint, ZERO } from '#event-store/projections';
import { awaitPostedThrough, LEDGER_POSTERS } from '#payments/audit';
import { PostgresEventStore } from '#event-store';
import { expectStatus, InvoiceGateway, Json, orderId, poll, sleep, startInvoiceGateway } from '../support/merchant-fixtures';
import { createTestDatabase } from '../support/test-database';
import { visibleHead } from '../support/project-to-head';

describe('figures as of a past instant', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    gw = await startInvoiceGateway();
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('a balance, the trial balance and a signed statement wait for an entry dated before their instant that is still to be posted', async () => {
    const m = await gw.operator.merchant();
    const from = new Date(Date.now() - 1_000).toISOString();
    const created = await m.test.post('/v1/invoices', { amount: '1000.00', orderId: orderId('final'), method: 'sbp' });
    expectStatus(created, 201);

    // The payments_to_ledger reactor cannot append the payment's entry to the ledger stream while this lock is held.
    const holder = await gw.db.pool.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [STREAM_APPEND_LOCK_NAMESPACE, `ledger-test_${m.accountId}`]);
    let released: Promise<unknown> = Promise.resolve();
    try {
      const paying = gw.operator.payment(created.body.id as string, 'paid');
      await poll(
        () => gw.operator.http.get(`/admin/v1/streams/invoice-${created.body.id}`),
        (r) => (r.body.events as Json[] | undefined)?.some((e) => e.type === 'InvoicePaid') === true,
        'the payment in the log',
      );
      const at = new Date().toISOString();
      await sleep(1_200);
      released = sleep(2_000).then(() => holder.query('COMMIT'));
      const reports = () =>
        Promise.all([
          gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=test&asOf=${at}`),
          gw.operator.http.get(`/admin/v1/audit/trial-balance?asOf=${at}`),
          m.test.get(`/v1/statements?from=${from}&to=${at}`),
        ]);
      const first = await reports();
      await released;
      expectStatus(await paying, 200);
      for (const r of first) expectStatus(r, 200);
      // The payment's net amount is held (24 h): in the balance as of the instant, and in the signed statement.
      expect(first[0].body.pending).not.toBe('0.00');
      expect(JSON.stringify(first[2].body)).toContain(created.body.id as string);
      // Asked again once everything has settled: the same figures, the same signed bytes.
      const again = await reports();
      expect(again.map((r) => r.body)).toEqual(first.map((r) => r.body));
    } finally {
      await released.catch(() => undefined);
      holder.release();
    }
  }, 60_000);
});

describe('awaitPostedThrough', () => {
  it('holds until every follower has reached the head of the log, and gives up after its wait', async () => {
    const db = await createTestDatabase({ poolSize: 2 });
    const store = new PostgresEventStore(db.pool);
    try {
      for (const name of LEDGER_POSTERS) await ensureCheckpoint(db.pool, name);
      await store.appendToStream('invoice-final', [{ id: randomUUID(), type: 'Noted', data: {} }]);
      const head = (await visibleHead(db.pool, store))!;
      const at = new Date(Date.now() - 5_000);
      // A reactor at the start of the log: not final.
      expect(await awaitPostedThrough(db.pool, store, new Date(), at, LEDGER_POSTERS, 300)).toBe(false);
      for (const name of LEDGER_POSTERS.slice(0, -1)) await advanceCheckpoint(db.pool, name, ZERO, head, 0);
      expect(await awaitPostedThrough(db.pool, store, new Date(), at, LEDGER_POSTERS, 300)).toBe(false);
      await advanceCheckpoint(db.pool, LEDGER_POSTERS[LEDGER_POSTERS.length - 1]!, ZERO, head, 0);
      expect(await awaitPostedThrough(db.pool, store, new Date(), at, LEDGER_POSTERS, 300)).toBe(true);
      // An instant within the posting margin of now is waited out (within the wait), then final; past the wait it is not.
      const now = new Date();
      expect(await awaitPostedThrough(db.pool, store, now, now, LEDGER_POSTERS, 3_000)).toBe(true);
      expect(await awaitPostedThrough(db.pool, store, now, new Date(now.getTime() + 10_000), LEDGER_POSTERS, 3_000)).toBe(false);
    } finally {
      await store.close();
      await db.drop();
    }
  });
});
