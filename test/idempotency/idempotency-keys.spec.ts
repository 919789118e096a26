/**
 * `Idempotency-Key` on every merchant POST, end to end against a started gateway
 * (CLOCK=manual): the same key with the same request answers the first answer again
 * (status, body, the same refund or payout), with another request 409
 * idempotency_key_conflict; concurrent requests with one key do the work once and all
 * get its answer; 4xx answers are replayed, 5xx (and 503) are not stored; a bad key is
 * 400 validation with param Idempotency-Key; keys are per project and mode (a key
 * rotation between a request and its retry changes nothing) and are kept 24 hours on the gateway clock. Without the header nothing changes.
 */
import { request as httpRequest } from 'node:http';
import { randomUUID } from 'node:crypto';
import { expectError, expectStatus, InvoiceGateway, Json, Merchant, Mode, orderId, poll, Reply, startInvoiceGateway } from '../support/merchant-fixtures';
import { fund, paidInvoice, payoutAddress, PHONE, TRC20, waitForBalance } from '../support/money-out-fixtures';
import { sendRaw, signedHeaders } from '../support/signing';

const REPLAYED = 'idempotent-replayed';

describe('Idempotency-Key on merchant POSTs (CLOCK=manual)', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    // CLOCK=manual: a key's 24 hours pass (and the gateway's time is read) through the operator's clock.
    gw = await startInvoiceGateway({ CLOCK: 'manual' });
  });
  afterAll(async () => {
    await gw?.close();
  });

  /** A POST with the merchant's key of `mode`, a JSON body as written, and (unless null) an Idempotency-Key. */
  const post = (m: Merchant, mode: Mode, path: string, body: string | undefined, key: string | null, extra: Record<string, string> = {}): Promise<Reply> =>
    sendRaw(gw.baseUrl, 'POST', path, {
      headers: {
        authorization: `Bearer ${m.keys[mode].secretKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(key === null ? {} : { 'idempotency-key': key }),
        ...extra,
      },
      body,
    });

  /** The events of a stream, from the database (the log itself). */
  const eventsOf = async (stream: string): Promise<Json[]> =>
    (await gw.db.pool.query('SELECT event_type AS type, data FROM events WHERE stream_name = $1 ORDER BY stream_revision', [stream])).rows;

  /** Ledger reservations posted for an account and mode, by cause. */
  const reservationsOf = async (accountId: string, mode: Mode): Promise<string[]> =>
    (
      await gw.db.pool.query<{ cause: string }>(
        `SELECT data->>'cause' AS cause FROM events WHERE stream_name = $1 AND event_type = 'LedgerEntryPosted' AND data->>'cause' LIKE 'reserve:%' ORDER BY global_position`,
        [`ledger-${mode}_${accountId}`],
      )
    ).rows.map((r) => r.cause);

  /** A merchant with `available` money in the mode and a paid invoice to refund. */
  const refundable = async (mode: Mode = 'test'): Promise<{ m: Merchant; invoiceId: string }> => {
    const m = await gw.operator.merchant({ holdHours: 0 });
    await fund(gw.operator, m, mode, ['5000.00']);
    const invoiceId = await paidInvoice(gw.operator, m[mode], '1000.00');
    return { m, invoiceId };
  };

  describe('POST /v1/invoices/{id}/refund', () => {
    /** `send`'s answer while the refund's first write (InvoiceRefundRequested) fails with SQLSTATE `code` (a trigger). */
    async function failingRefundRequest<T>(code: string, send: () => Promise<T>): Promise<T> {
      await gw.db.pool.query(`CREATE OR REPLACE FUNCTION fail_refund_request() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'refund requests fail for this test' USING ERRCODE = '${code}'; END $$`);
      await gw.db.pool.query(`CREATE OR REPLACE TRIGGER fail_refund_request BEFORE INSERT ON events FOR EACH ROW
        WHEN (NEW.event_type = 'InvoiceRefundRequested') EXECUTE FUNCTION fail_refund_request()`);
      try {
        return await send();
      } finally {
        await gw.db.pool.query('DROP TRIGGER IF EXISTS fail_refund_request ON events');
      }
    }

    it('the same key and body twice: the same 202 with the same refund, one refund on the invoice and one reservation', async () => {
      const { m, invoiceId } = await refundable();
      const key = randomUUID();
      const body = '{"amount":"100.00"}';
      const first = await post(m, 'test', `/v1/invoices/${invoiceId}/refund`, body, key);
      expectStatus(first, 202);
      expect(first.headers.get(REPLAYED)).toBeNull();
      const second = await post(m, 'test', `/v1/invoices/${invoiceId}/refund`, body, key);
      expect({ status: second.status, body: second.body }).toEqual({ status: 202, body: first.body });
      expect(second.headers.get(REPLAYED)).toBe('true');
      const requested = (await eventsOf(`invoice-${invoiceId}`)).filter((e) => e.type === 'InvoiceRefundRequested');
      expect(requested.map((e) => e.data.refundId)).toEqual([first.body.id]);
      expect(await reservationsOf(m.accountId, 'test')).toEqual([`reserve:${first.body.id}`]);
    });

    it('without the header, behaviour is unchanged: two identical requests are two refunds', async () => {
      const { m, invoiceId } = await refundable();
      const a = await post(m, 'test', `/v1/invoices/${invoiceId}/refund`, '{"amount":"10.00"}', null);
      const b = await post(m, 'test', `/v1/invoices/${invoiceId}/refund`, '{"amount":"10.00"}', null);
      expectStatus(a, 202);
      expectStatus(b, 202);
      expect(a.body.id).not.toBe(b.body.id);
      expect(a.headers.get(REPLAYED)).toBeNull();
    });

    it('the same key with another body, another invoice or another method of writing the body: 409 idempotency_key_conflict, nothing refunded', async () => {
      const { m, invoiceId } = await refundable();
      const other = await paidInvoice(gw.operator, m.test, '500.00');
      const key = randomUUID();
      expectStatus(await post(m, 'test', `/v1/invoices/${invoiceId}/refund`, '{"amount":"100.00"}', key), 202);
      for (const [path, body] of [
        [`/v1/invoices/${invoiceId}/refund`, '{"amount":"200.00"}'],
        [`/v1/invoices/${invoiceId}/refund`, '{"amount": "100.00"}'],
        [`/v1/invoices/${invoiceId}/refund`, undefined],
        [`/v1/invoices/${other}/refund`, '{"amount":"100.00"}'],
        ['/v1/invoices', `{"amount":"100.00","orderId":"${orderId()}"}`],
      ] as const) {
        const r = await post(m, 'test', path, body, key);
        expectError(r, 409, 'idempotency_key_conflict', 'Idempotency-Key');
      }
      expect((await eventsOf(`invoice-${other}`)).filter((e) => e.type === 'InvoiceRefundRequested')).toEqual([]);
      expect(await reservationsOf(m.accountId, 'test')).toHaveLength(1);
    });

    it("a 4xx answer is the key's answer too: replayed after the cause went away; a new key then succeeds", async () => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      await fund(gw.operator, m, 'test', ['5000.00']);
      const created = await m.test.post('/v1/invoices', { amount: '300.00', orderId: orderId(), method: 'sbp' });
      expectStatus(created, 201);
      const path = `/v1/invoices/${created.body.id}/refund`;
      const key = randomUUID();
      const first = await post(m, 'test', path, undefined, key);
      expectError(first, 409, 'conflict');
      expectStatus(await gw.operator.payment(created.body.id, 'paid'), 200);
      const again = await post(m, 'test', path, undefined, key);
      expect({ status: again.status, body: again.body, replayed: again.headers.get(REPLAYED) }).toEqual({ status: 409, body: first.body, replayed: 'true' });
      const invalid = await post(m, 'test', path, '{"amount":"1.234"}', 'bad-body-key');
      expectError(invalid, 400, 'validation', 'amount');
      expect((await post(m, 'test', path, '{"amount":"1.234"}', 'bad-body-key')).headers.get(REPLAYED)).toBe('true');
      expectStatus(await post(m, 'test', path, undefined, randomUUID()), 202);
    });

    it('a 500 or 503 is not stored: the retry with the same key runs again and succeeds', async () => {
      const { m, invoiceId } = await refundable();
      const path = `/v1/invoices/${invoiceId}/refund`;
      // A real failure of the database on the refund's first write (a trigger), as 500 and as 503.
      const fail = async (sqlstate: string) => {
        await gw.db.pool.query(`CREATE OR REPLACE FUNCTION fail_refund_request() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN RAISE EXCEPTION 'refund requests fail for this test' USING ERRCODE = '${sqlstate}'; END $$`);
        await gw.db.pool.query(`CREATE OR REPLACE TRIGGER fail_refund_request BEFORE INSERT ON events FOR EACH ROW
          WHEN (NEW.event_type = 'InvoiceRefundRequested') EXECUTE FUNCTION fail_refund_request()`);
      };
      const key = randomUUID();
      try {
        await fail('P0001');
        expectError(await post(m, 'test', path, '{"amount":"50.00"}', key), 500, 'internal');
        await fail('57P01');
        expectError(await post(m, 'test', path, '{"amount":"50.00"}', key), 503, 'provider_unavailable');
      } finally {
        await gw.db.pool.query('DROP TRIGGER IF EXISTS fail_refund_request ON events');
      }
      const r = await post(m, 'test', path, '{"amount":"50.00"}', key);
      expectStatus(r, 202);
      expect(r.headers.get(REPLAYED)).toBeNull();
      const again = await post(m, 'test', path, '{"amount":"50.00"}', key);
      expect({ status: again.status, body: again.body }).toEqual({ status: 202, body: r.body });
    });

    it('a first request answered 503 with nothing written leaves nothing under its key: another request may use it', async () => {
      const { m, invoiceId } = await refundable();
      const path = `/v1/invoices/${invoiceId}/refund`;
      // The database goes away at the refund's first write (a connection-class code): 503, nothing written.
      const key = randomUUID();
      expectError(await failingRefundRequest('57P01', () => post(m, 'test', path, '{"amount":"50.00"}', key)), 503, 'provider_unavailable');
      expect(await eventsOf(`invoice-${invoiceId}`)).not.toContainEqual(expect.objectContaining({ type: 'InvoiceRefundRequested' }));
      const other = await post(m, 'test', path, '{"amount":"60.00"}', key);
      expectStatus(other, 202);
      expect(other.body).toMatchObject({ amount: '60.00' });
    });

    it('a first request answered 500 keeps its key bound to it (a failure of no known kind may have written): another body is 409, the same one runs', async () => {
      const { m, invoiceId } = await refundable();
      const path = `/v1/invoices/${invoiceId}/refund`;
      // An unexpected failure at the refund's first write (internal_error): 500.
      const key = randomUUID();
      expectError(await failingRefundRequest('XX000', () => post(m, 'test', path, '{"amount":"50.00"}', key)), 500, 'internal');
      expectError(await post(m, 'test', path, '{"amount":"60.00"}', key), 409, 'idempotency_key_conflict');
      const retry = await post(m, 'test', path, '{"amount":"50.00"}', key);
      expectStatus(retry, 202);
      expect(retry.body).toMatchObject({ amount: '50.00' });
    });

    it('12 concurrent requests with one key: one runs, every one gets its answer, one refund and one reservation', async () => {
      const { m, invoiceId } = await refundable();
      const key = randomUUID();
      const replies = await Promise.all(Array.from({ length: 12 }, () => post(m, 'test', `/v1/invoices/${invoiceId}/refund`, '{"amount":"70.00"}', key)));
      for (const r of replies) expect({ status: r.status, body: r.body }).toEqual({ status: 202, body: replies[0]!.body });
      expect(replies.filter((r) => r.headers.get(REPLAYED) === null)).toHaveLength(1);
      const requested = (await eventsOf(`invoice-${invoiceId}`)).filter((e) => e.type === 'InvoiceRefundRequested');
      expect(requested.map((e) => e.data.refundId)).toEqual([replies[0]!.body.id]);
      expect(await reservationsOf(m.accountId, 'test')).toEqual([`reserve:${replies[0]!.body.id}`]);
      await waitForBalance(m.test, { reserved: '70.00' });
    });
  });

  describe('POST /v1/payouts', () => {
    const payoutBody = (addressId: number, amount = '150.00') => `{"amount":"${amount}","addressId":${addressId}}`;

    it('without orderId, the same key twice: the same payout (201 both times), not a duplicate_request; without a key the repeat is 409 duplicate_request', async () => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      await fund(gw.operator, m, 'live', ['5000.00']);
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
      const key = randomUUID();
      const first = await post(m, 'live', '/v1/payouts', payoutBody(address.id), key);
      expectStatus(first, 201);
      const second = await post(m, 'live', '/v1/payouts', payoutBody(address.id), key);
      expect({ status: second.status, body: second.body, replayed: second.headers.get(REPLAYED) }).toEqual({ status: 201, body: first.body, replayed: 'true' });
      expect(await reservationsOf(m.accountId, 'live')).toEqual([`reserve:po_${first.body.id}`]);
      // Unchanged without the header: the spec's duplicate window.
      const unkeyed = await post(m, 'live', '/v1/payouts', payoutBody(address.id), null);
      expectError(unkeyed, 409, 'duplicate_request');
    });

    it('10 concurrent requests with one key and no orderId: one payout, every answer the same 201', async () => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      await fund(gw.operator, m, 'live', ['5000.00']);
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_trc20', account: TRC20 });
      const key = `payout ${randomUUID()}`;
      const replies = await Promise.all(Array.from({ length: 10 }, () => post(m, 'live', '/v1/payouts', payoutBody(address.id, '700.00'), key)));
      for (const r of replies) expect({ status: r.status, body: r.body }).toEqual({ status: 201, body: replies[0]!.body });
      expect(replies.filter((r) => r.headers.get(REPLAYED) === null)).toHaveLength(1);
      expect(await reservationsOf(m.accountId, 'live')).toEqual([`reserve:po_${replies[0]!.body.id}`]);
      // The list is a read model: wait until the payouts projection has applied the payout (a busy machine delays it).
      const list = await poll(
        () => m.live.get('/v1/payouts'),
        (r) => r.body.items.length > 0,
        'the payout in the list',
      );
      expect(list.body.items.map((p: Json) => p.id)).toEqual([replies[0]!.body.id]);
    });

    it("a refusal is the key's answer (403 test_mode, 422 insufficient_balance), replayed as it was", async () => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
      const key = randomUUID();
      const poor = await post(m, 'live', '/v1/payouts', payoutBody(address.id), key);
      expectError(poor, 422, 'insufficient_balance');
      await fund(gw.operator, m, 'live', ['5000.00']);
      const again = await post(m, 'live', '/v1/payouts', payoutBody(address.id), key);
      expect({ status: again.status, body: again.body }).toEqual({ status: 422, body: poor.body });
      const testKey = randomUUID();
      expectError(await post(m, 'test', '/v1/payouts', payoutBody(address.id), testKey), 403, 'test_mode');
      expectError(await post(m, 'test', '/v1/payouts', payoutBody(address.id), testKey), 403, 'test_mode');
      expectStatus(await post(m, 'live', '/v1/payouts', payoutBody(address.id), randomUUID()), 201);
    });
  });

  describe('POST /v1/invoices', () => {
    it('the same key and body: the first answer again (201, not the 200 of an orderId repeat); another body under the key: 409 idempotency_key_conflict', async () => {
      const m = await gw.operator.merchant();
      const key = randomUUID();
      const body = JSON.stringify({ amount: '250.00', orderId: orderId('keyed') });
      const first = await post(m, 'test', '/v1/invoices', body, key);
      expectStatus(first, 201);
      const second = await post(m, 'test', '/v1/invoices', body, key);
      expect({ status: second.status, body: second.body, replayed: second.headers.get(REPLAYED) }).toEqual({ status: 201, body: first.body, replayed: 'true' });
      // The orderId is still the invoice's own idempotency key: without the header, a repeat is 200.
      expectStatus(await post(m, 'test', '/v1/invoices', body, null), 200);
      const other = await post(m, 'test', '/v1/invoices', JSON.stringify({ amount: '250.00', orderId: orderId('other') }), key);
      expectError(other, 409, 'idempotency_key_conflict', 'Idempotency-Key');
    });

    it('20 concurrent creates with one key: all the same 201 with one invoice', async () => {
      const m = await gw.operator.merchant();
      const key = randomUUID();
      const body = JSON.stringify({ amount: '99.00', orderId: orderId('concurrent') });
      const replies = await Promise.all(Array.from({ length: 20 }, () => post(m, 'test', '/v1/invoices', body, key)));
      for (const r of replies) expect({ status: r.status, body: r.body }).toEqual({ status: 201, body: replies[0]!.body });
    });

    it("keys belong to a project and mode: the same key with another mode's key or another project runs on its own", async () => {
      const m = await gw.operator.merchant();
      const n = await gw.operator.merchant();
      const key = randomUUID();
      const body = (id: string) => JSON.stringify({ amount: '10.00', orderId: id });
      expectStatus(await post(m, 'test', '/v1/invoices', body('a'), key), 201);
      expectStatus(await post(m, 'live', '/v1/invoices', body('b'), key), 201);
      expectStatus(await post(n, 'test', '/v1/invoices', body('c'), key), 201);
    });

    it('HMAC mode: a retry signed anew (new timestamp) with the same key and body is the same request', async () => {
      const m = await gw.operator.merchant();
      const secret = (await gw.operator.http.get(`/admin/v1/projects/${m.projectId}`)).body.webhookSecret;
      const body = JSON.stringify({ amount: '12.00', orderId: orderId('hmac') });
      const key = randomUUID();
      const now = Math.floor((await gw.operator.advance(0)).getTime() / 1000);
      const send = (timestamp: number) =>
        sendRaw(gw.baseUrl, 'POST', '/v1/invoices', {
          headers: {
            ...signedHeaders({ method: 'POST', path: '/v1/invoices', body, secret, publicId: m.keys.test.publicKey, timestamp }).headers,
            'idempotency-key': key,
          },
          body,
        });
      const first = await send(now);
      expectStatus(first, 201);
      const retry = await send(now + 1);
      expect({ status: retry.status, body: retry.body, replayed: retry.headers.get(REPLAYED) }).toEqual({ status: 201, body: first.body, replayed: 'true' });
    });
  });

  describe('a key rotation between a request and its retry (the key belongs to the project and mode)', () => {
    /** The operator rotates the merchant's key pair of `mode`: the merchant as it is afterwards (the old pair is revoked). */
    const rotated = async (m: Merchant, mode: Mode): Promise<Merchant> => {
      const r = await gw.operator.http.post(`/admin/v1/projects/${m.projectId}/keys/rotate`, { mode });
      expectStatus(r, 201);
      const after = { ...m, keys: { ...m.keys, [mode]: { secretKey: r.body.secretKey, publicKey: r.body.publicKey } } };
      expectError(await post(m, mode, '/v1/invoices', JSON.stringify({ amount: '1.00', orderId: orderId('old') }), null), 401, 'unauthorized');
      return after;
    };

    it('a refund retried under the new pair: the first 202 again, one refund on the invoice; the key under another project is its own', async () => {
      const { m, invoiceId } = await refundable();
      const key = `refund-${randomUUID()}`;
      const body = '{"amount":"100.00"}';
      const first = await post(m, 'test', `/v1/invoices/${invoiceId}/refund`, body, key);
      expectStatus(first, 202);
      const after = await rotated(m, 'test');
      const retry = await post(after, 'test', `/v1/invoices/${invoiceId}/refund`, body, key);
      expect({ status: retry.status, body: retry.body, replayed: retry.headers.get(REPLAYED) }).toEqual({ status: 202, body: first.body, replayed: 'true' });
      const requested = (await eventsOf(`invoice-${invoiceId}`)).filter((e) => e.type === 'InvoiceRefundRequested');
      expect(requested.map((e) => e.data.refundId)).toEqual([first.body.id]);
      expect(await reservationsOf(m.accountId, 'test')).toEqual([`reserve:${first.body.id}`]);
      // Another project's refund under the same key and body is its own.
      const other = await refundable();
      const theirs = await post(other.m, 'test', `/v1/invoices/${other.invoiceId}/refund`, body, key);
      expectStatus(theirs, 202);
      expect(theirs.headers.get(REPLAYED)).toBeNull();
      expect(theirs.body.id).not.toBe(first.body.id);
    });

    it('a payout without orderId retried under the new pair: the same payout (201 replayed), one reservation', async () => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      await fund(gw.operator, m, 'live', ['5000.00']);
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
      const key = randomUUID();
      const body = `{"amount":"150.00","addressId":${address.id}}`;
      const first = await post(m, 'live', '/v1/payouts', body, key);
      expectStatus(first, 201);
      const retry = await post(await rotated(m, 'live'), 'live', '/v1/payouts', body, key);
      expect({ status: retry.status, body: retry.body, replayed: retry.headers.get(REPLAYED) }).toEqual({ status: 201, body: first.body, replayed: 'true' });
      expect(await reservationsOf(m.accountId, 'live')).toEqual([`reserve:po_${first.body.id}`]);
    });

    it('an invoice create retried under the new pair: its 201 again (not the 200 of an orderId repeat)', async () => {
      const m = await gw.operator.merchant();
      const key = randomUUID();
      const body = JSON.stringify({ amount: '250.00', orderId: orderId('rotated') });
      const first = await post(m, 'test', '/v1/invoices', body, key);
      expectStatus(first, 201);
      const retry = await post(await rotated(m, 'test'), 'test', '/v1/invoices', body, key);
      expect({ status: retry.status, body: retry.body, replayed: retry.headers.get(REPLAYED) }).toEqual({ status: 201, body: first.body, replayed: 'true' });
    });
  });

  describe('the key itself', () => {
    let shared: { m: Merchant; invoiceId: string } | undefined;

    it.each([
      ['empty', ''],
      ['256 characters', 'k'.repeat(256)],
      ['a tab inside', 'a\tb'],
      ['a Latin-1 letter', 'caf\u00e9'],
      ['a no-break space', 'x\u00a0y'],
    ])('%s → 400 validation, param Idempotency-Key, on every merchant POST, and nothing is done', async (_, key) => {
      shared ??= await refundable();
      const { m, invoiceId } = shared;
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
      for (const [mode, path, body] of [
        ['test', '/v1/invoices', JSON.stringify({ amount: '10.00', orderId: orderId() })],
        ['test', `/v1/invoices/${invoiceId}/refund`, '{"amount":"10.00"}'],
        ['live', '/v1/payouts', `{"amount":"150.00","addressId":${address.id}}`],
      ] as const) {
        const r = await post(m, mode, path, body, key);
        expectError(r, 400, 'validation', 'Idempotency-Key');
        expect(r.body.error.details).toEqual([expect.objectContaining({ param: 'Idempotency-Key', code: 'invalid_idempotency_key' })]);
      }
      expect(await reservationsOf(m.accountId, 'test')).toEqual([]);
    });

    it('1 and 255 printable ASCII characters (space and ~ included) are keys', async () => {
      const m = await gw.operator.merchant();
      for (const key of ['x', `~ ${'!'.repeat(251)} ~`, ' inner spaces ']) {
        const body = JSON.stringify({ amount: '10.00', orderId: orderId() });
        const first = await post(m, 'test', '/v1/invoices', body, key);
        expectStatus(first, 201);
        expect((await post(m, 'test', '/v1/invoices', body, key)).headers.get(REPLAYED)).toBe('true');
      }
    });

    it('the header sent twice → 400 validation, param Idempotency-Key', async () => {
      const m = await gw.operator.merchant();
      const url = new URL('/v1/invoices', gw.baseUrl);
      const body = JSON.stringify({ amount: '10.00', orderId: orderId() });
      const reply = await new Promise<{ status: number; body: Json }>((resolve, reject) => {
        const req = httpRequest(url, { method: 'POST' }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString('utf8')));
          res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.setHeader('authorization', `Bearer ${m.keys.test.secretKey}`);
        req.setHeader('content-type', 'application/json');
        req.setHeader('idempotency-key', ['one', 'two']);
        req.end(body);
      });
      expect({ status: reply.status, code: reply.body.error.code, param: reply.body.error.param }).toEqual({
        status: 400,
        code: 'validation',
        param: 'Idempotency-Key',
      });
    });

    it('is ignored on GET', async () => {
      const m = await gw.operator.merchant();
      const r = await sendRaw(gw.baseUrl, 'GET', '/v1/balance', { headers: { authorization: `Bearer ${m.keys.test.secretKey}`, 'idempotency-key': '' } });
      expectStatus(r, 200);
    });
  });

  // Last: it moves the shared clock a day forward.
  describe('retention', () => {
    it('a key is kept 24 hours on the gateway clock, then forgotten (the key may name a new request)', async () => {
      const m = await gw.operator.merchant();
      const key = randomUUID();
      const body = JSON.stringify({ amount: '10.00', orderId: orderId('kept') });
      expectStatus(await post(m, 'test', '/v1/invoices', body, key), 201);
      await gw.operator.advance(24 * 3600 - 120);
      const other = JSON.stringify({ amount: '10.00', orderId: orderId('new') });
      expectError(await post(m, 'test', '/v1/invoices', other, key), 409, 'idempotency_key_conflict', 'Idempotency-Key');
      expect((await post(m, 'test', '/v1/invoices', body, key)).headers.get(REPLAYED)).toBe('true');
      await gw.operator.advance(180);
      const after = await post(m, 'test', '/v1/invoices', other, key);
      expectStatus(after, 201);
      expect(after.headers.get(REPLAYED)).toBeNull();
    });
  });
});
