/**
 * The lease of a running keyed request, against a started gateway: while the first
 * request with a key is alive, however slow (here: its ledger append waits for the
 * stream's append lock, which the test holds longer than the 5 s lease), its process
 * renews the lease, so a repeat waits its 6 s and gets 409 idempotency_key_in_use; it
 * never takes the key over and runs the request a second time. Once the first answers,
 * a repeat gets its answer. (A dead holder's key is taken over: idempotency-crash.spec.ts.)
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { STREAM_APPEND_LOCK_NAMESPACE } from '#event-store/postgres';
import { expectError, expectStatus, InvoiceGateway, Json, Merchant, Mode, poll, Reply, sleep, startInvoiceGateway } from '../support/merchant-fixtures';
import { fund, ledgerStream, paidInvoice, payoutAddress, PHONE } from '../support/money-out-fixtures';
import { sendRaw } from '../support/signing';

const REPLAYED = 'idempotent-replayed';

jest.setTimeout(120_000);

describe('Idempotency-Key: a live but slow first request keeps its key', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    gw = await startInvoiceGateway();
  });
  afterAll(async () => {
    await gw?.close();
  });

  const post = (m: Merchant, mode: Mode, path: string, body: string, key: string): Promise<Reply> =>
    sendRaw(gw.baseUrl, 'POST', path, {
      headers: { authorization: `Bearer ${m.keys[mode].secretKey}`, 'content-type': 'application/json', 'idempotency-key': key },
      body,
    });

  const claimOf = async (mode: Mode, key: string): Promise<string | undefined> =>
    (await gw.db.pool.query<{ claim: string }>('SELECT claim FROM idempotency_keys WHERE mode = $1 AND idempotency_key = $2', [mode, key])).rows[0]?.claim;

  const reservationsOf = async (m: Merchant, mode: Mode): Promise<string[]> =>
    (
      await gw.db.pool.query<{ cause: string }>(
        `SELECT data->>'cause' AS cause FROM events WHERE stream_name = $1 AND event_type = 'LedgerEntryPosted' AND data->>'cause' LIKE 'reserve:%' ORDER BY global_position`,
        [ledgerStream(m, mode)],
      )
    ).rows.map((r) => r.cause);

  /**
   * Sends `send()` while the ledger's append lock is held, until a gateway session waits
   * there; then sends it again and keeps the lock until that repeat answers (or the key
   * was taken over: a second run, which would wait on the lock too). Answers both
   * replies and whether the key's claim ever changed hands.
   */
  async function firstHeldThenRepeat(m: Merchant, mode: Mode, key: string, send: () => Promise<Reply>) {
    const stream = ledgerStream(m, mode);
    const holder = new Client({ connectionString: gw.db.url, application_name: 'ledger-lock-holder' });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [STREAM_APPEND_LOCK_NAMESPACE, stream]);
      const first = send();
      await poll(
        async () =>
          (
            await holder.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = $1::oid AND objid = hashtext($2)::oid`, [
              STREAM_APPEND_LOCK_NAMESPACE,
              stream,
            ])
          ).rowCount,
        (waiting) => waiting! > 0,
        'the first request waiting for the ledger append lock',
        30_000,
      );
      const claim = await claimOf(mode, key);
      let repeatAnswered = false;
      const repeat = send().finally(() => (repeatAnswered = true));
      let takenOver = false;
      while (!repeatAnswered && !takenOver) {
        takenOver = (await claimOf(mode, key)) !== claim;
        await sleep(50);
      }
      await holder.query('ROLLBACK');
      return { first: await first, repeat: await repeat, claim, takenOver };
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  }

  it.each([
    ['a refund', 'test' as Mode],
    ['a payout', 'live' as Mode],
  ])(
    '%s held on the ledger past the lease: the repeat gets 409 idempotency_key_in_use, not a second run; after the first answers, its replay',
    async (what, mode) => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      await fund(gw.operator, m, mode, ['3000.00']);
      let path: string;
      let body: string;
      let created: number;
      if (what === 'a refund') {
        const invoiceId = await paidInvoice(gw.operator, m[mode], '1000.00');
        // Its payment in the ledger first: else its posting could be the waiter on the ledger's lock taken for the first request.
        await poll(
          async () =>
            (
              await gw.db.pool.query(`SELECT 1 FROM events WHERE stream_name = $1 AND event_type = 'LedgerEntryPosted' AND data->>'cause' = $2`, [
                ledgerStream(m, mode),
                `payment:${invoiceId}`,
              ])
            ).rowCount,
          (n) => n === 1,
          'the payment in the ledger',
          30_000,
        );
        path = `/v1/invoices/${invoiceId}/refund`;
        body = '{"amount":"100.00"}';
        created = 202;
      } else {
        const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
        path = '/v1/payouts';
        body = `{"amount":"200.00","addressId":${address.id}}`;
        created = 201;
      }
      const key = randomUUID();

      const { first, repeat, claim, takenOver } = await firstHeldThenRepeat(m, mode, key, () => post(m, mode, path, body, key));

      expect(claim).toBeDefined();
      expect(takenOver).toBe(false);
      expectError(repeat, 409, 'idempotency_key_in_use', 'Idempotency-Key');
      expect(repeat.headers.get('retry-after')).toBe('1');
      expectStatus(first, created);
      expect(first.headers.get(REPLAYED)).toBeNull();
      expect(await claimOf(mode, key)).toBe(claim);

      const after = await post(m, mode, path, body, key);
      expect({ status: after.status, body: after.body, replayed: after.headers.get(REPLAYED) }).toEqual({
        status: created,
        body: first.body,
        replayed: 'true',
      });
      const id = (first.body as Json).id;
      expect(await reservationsOf(m, mode)).toEqual([what === 'a refund' ? `reserve:${id}` : `reserve:po_${id}`]);
    },
  );
});
