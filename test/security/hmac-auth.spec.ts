/**
 * Mode 2 of the spec's Authentication (HMAC request signing), against two API
 * processes on one database with CLOCK=manual:
 * - X-Public-Id (pk_test_/pk_live_), X-Timestamp (unix seconds), X-Signature or
 *   Signature: hex HMAC-SHA256 over `<timestamp>.<exact raw body>` keyed with the
 *   project's webhook secret (`<timestamp>.` for GET);
 * - every refusal with its code (unauthorized, timestamp_invalid, signature_invalid);
 * - the ±300 s window read on the gateway clock, at its edges;
 * - one acceptance per signature, in whichever process the repeat arrives;
 * - revocation by key rotation, at once in both processes;
 * - modes and projects kept apart.
 */
import { createHash, createHmac } from 'node:crypto';
import { Client } from 'pg';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { api, CYRILLIC, expectStatus, Json, Merchant, Mode, Operator, orderId, poll, Reply } from '../support/merchant-fixtures';
import { GatewayClock, sendRaw, sendSigned, SignedRequest, signRequest } from '../support/signing';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-hmac-tests-0042';

/** Who signs: a public key and the project's webhook secret. */
interface Signer {
  readonly publicId: string;
  readonly secret: string;
}

/** The spec's error: status, code, the exact shape, a Russian message. */
function expectApiError(reply: Reply, status: number, code: string): void {
  expect({ status: reply.status, code: reply.body?.error?.code }).toEqual({ status, code });
  expect(Object.keys(reply.body)).toEqual(['error']);
  expect(typeof reply.body.error.message).toBe('string');
  expect(reply.body.error.message).toMatch(CYRILLIC);
}

/** An advisory lock the test holds to line concurrent copies up. */
const HOLD_SIGNATURE = 7_420_004;

describe('HMAC request signing (mode 2) across two API processes', () => {
  let db: TestDatabase;
  let a: RunningGateway;
  let b: RunningGateway;
  let opA: Operator;
  let opB: Operator;
  let clock: GatewayClock;
  let shop: Merchant;
  let other: Merchant;
  let shopSecret: string;
  let otherSecret: string;

  const processes = () =>
    [
      ['A', a.baseUrl],
      ['B', b.baseUrl],
    ] as const;

  const signer = (m: Merchant, mode: Mode, secret: string): Signer => ({ publicId: m.keys[mode].publicKey, secret });

  /**
   * A timestamp no other request of this file used: GET signatures cover only the
   * timestamp, so two GETs of one key with one timestamp are one signature (a replay).
   * Strictly increasing, always inside the ±300 s window.
   */
  let tsCounter = 0;
  const freshTimestamp = (): number => {
    if (tsCounter > 450) throw new Error('freshTimestamp: too many requests for one window');
    return clock.nowSeconds() - 200 + tsCounter++;
  };

  const signedGet = (baseUrl: string, s: Signer, path: string, extra: Partial<SignedRequest> = {}) =>
    sendSigned(baseUrl, { method: 'GET', path, publicId: s.publicId, secret: s.secret, timestamp: freshTimestamp(), ...extra });

  const signedPost = (baseUrl: string, s: Signer, path: string, body: string, extra: Partial<SignedRequest> = {}) =>
    sendSigned(baseUrl, { method: 'POST', path, body, publicId: s.publicId, secret: s.secret, timestamp: freshTimestamp(), ...extra });

  /** Both processes follow the manual clock at once (the other one would within 200 ms). */
  const advanceBoth = async (seconds: number) => {
    await clock.advance(opA, seconds);
    await opB.advance(0);
  };

  const webhookSecretOf = async (projectId: string): Promise<string> => {
    const r = await opA.http.get(`/admin/v1/projects/${projectId}`);
    expectStatus(r, 200);
    expect(r.body.webhookSecret).toEqual(expect.any(String));
    return r.body.webhookSecret as string;
  };

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    const env = {
      DATABASE_URL: db.url,
      ADMIN_TOKEN,
      CLOCK: 'manual',
      // Each refusal rule is asserted as its 401, well over 20 of them from this one address: past the limit they would be 429.
      AUTH_FAILURE_LIMIT_PER_ADDRESS: '1000000',
      // The suite reads the same invoices through both processes in turn, faster than once per 3 s.
      POLL_INTERVAL_SECONDS: '0',
    };
    a = await startGateway('api', env);
    b = await startGateway('api', env);
    opA = new Operator(a.baseUrl, ADMIN_TOKEN);
    opB = new Operator(b.baseUrl, ADMIN_TOKEN);
    clock = await GatewayClock.read(opA);
    await opB.advance(0);
    shop = await opA.merchant({ name: 'Подписи' });
    other = await opA.merchant({ name: 'Чужой' });
    shopSecret = await webhookSecretOf(shop.projectId);
    otherSecret = await webhookSecretOf(other.projectId);
  });

  afterAll(async () => {
    await a?.kill();
    await b?.kill();
    await db?.drop();
  });

  describe('accepted', () => {
    it('a signed GET /v1/methods with X-Signature works in both processes, with the test and the live key', async () => {
      for (const [, url] of processes()) {
        for (const mode of ['test', 'live'] as const) {
          const r = await signedGet(url, signer(shop, mode, shopSecret), '/v1/methods');
          expectStatus(r, 200);
          expect(r.body.methods.map((m: Json) => m.code)).toEqual(['sbp', 'card', 'crypto']);
        }
      }
    });

    it('the plain Signature header is accepted as well', async () => {
      for (const [, url] of processes()) {
        const r = await signedGet(url, signer(shop, 'test', shopSecret), '/v1/balance', { signatureHeader: 'signature' });
        expectStatus(r, 200);
        expect(r.body).toMatchObject({ currency: 'RUB' });
      }
    });

    it('the signature covers the exact raw bytes: odd whitespace, key order and unicode escapes are signed as sent', async () => {
      const id = orderId('raw');
      // Not what JSON.stringify would produce: spaces, tabs, newlines, orderId first, \u escapes, an escaped slash.
      const raw =
        `{\n  "orderId" :\t"${id}" ,\r\n "description":"\\u041f\\u0440\\u0438\\u0432\\u0435\\u0442 \\ud83d\\ude00 \\"q\\" \\/ ",` +
        `   "customer" : { "name" : "\\u0401\\u0436\\u0438\\u043a" } ,"amount"  :  "10.00"\n}\n\n`;
      const r = await signedPost(a.baseUrl, signer(shop, 'test', shopSecret), '/v1/invoices', raw);
      expectStatus(r, 201);
      const got = await shop.test.get(`/v1/invoices/${r.body.id}`);
      expectStatus(got, 200);
      expect(got.body).toMatchObject({ orderId: id, amount: '10.00', description: 'Привет 😀 "q" / ', customer: { name: 'Ёжик' }, isTest: true });
    });

    it('UTF-8 bytes in the body are signed as bytes', async () => {
      const raw = JSON.stringify({ amount: '11.00', orderId: orderId('utf8'), description: 'Оплата заказа №7 — «ёлка» 🎄' });
      expect(Buffer.byteLength(raw)).toBeGreaterThan(raw.length);
      const r = await signedPost(b.baseUrl, signer(shop, 'test', shopSecret), '/v1/invoices', raw);
      expectStatus(r, 201);
    });

    it('a signed POST with the live public key creates a live invoice', async () => {
      const raw = JSON.stringify({ amount: '12.00', orderId: orderId('live') });
      const r = await signedPost(b.baseUrl, signer(shop, 'live', shopSecret), '/v1/invoices', raw);
      expectStatus(r, 201);
      const got = await shop.live.get(`/v1/invoices/${r.body.id}`);
      expectStatus(got, 200);
      expect(got.body.isTest).toBe(false);
      expectApiError(await shop.test.get(`/v1/invoices/${r.body.id}`), 404, 'invoice_not_found');
    });

    it('an empty Authorization header (a framework’s default) beside the HMAC headers carries nothing: the signed request is taken', async () => {
      const raw = JSON.stringify({ amount: '13.00', orderId: orderId('empty-auth') });
      const r = await signedPost(a.baseUrl, signer(shop, 'test', shopSecret), '/v1/invoices', raw, { extraHeaders: { authorization: '' } });
      expectStatus(r, 201);
    });

    it('a Bearer key and the HMAC headers in one request → 401 unauthorized naming X-Public-Id, nothing created (a request uses one mode)', async () => {
      const raw = JSON.stringify({ amount: '14.00', orderId: orderId('two-modes') });
      for (const signature of [undefined, 'ab'.repeat(32)]) {
        const r = await signedPost(a.baseUrl, signer(shop, 'test', shopSecret), '/v1/invoices', raw, {
          signature,
          extraHeaders: { authorization: `Bearer ${shop.keys.test.secretKey}` },
        });
        expectApiError(r, 401, 'unauthorized');
        expect(r.body.error.param).toBe('X-Public-Id');
      }
      // Nothing was created: the same body with the Bearer key alone creates the invoice now.
      expectStatus(
        await sendRaw(a.baseUrl, 'POST', '/v1/invoices', {
          headers: { authorization: `Bearer ${shop.keys.test.secretKey}`, 'content-type': 'application/json' },
          body: raw,
        }),
        201,
      );
    });

    it('a re-serialised body does not match its signature (either way round), and creates nothing', async () => {
      const id = orderId('reser');
      const raw = `{ "amount": "10.00",  "orderId": "${id}", "description": "\\u0444" }`;
      const reserialised = JSON.stringify(JSON.parse(raw));
      expect(reserialised).not.toBe(raw);
      const s = signer(shop, 'test', shopSecret);
      // Sent as written, signed after JSON.parse + JSON.stringify (what a framework would hand the signer).
      expectApiError(await signedPost(a.baseUrl, s, '/v1/invoices', raw, { signedBody: reserialised }), 401, 'signature_invalid');
      // Signed as written, sent re-serialised (what a client library would send).
      expectApiError(await signedPost(b.baseUrl, s, '/v1/invoices', reserialised, { signedBody: raw }), 401, 'signature_invalid');
      // Nothing was created: the orderId is still free for another amount (a stored one would give 409).
      expectStatus(await shop.test.post('/v1/invoices', { amount: '20.00', orderId: id }), 201);
    });
  });

  describe('401 unauthorized: missing, unknown or malformed public key', () => {
    it('no authentication headers at all', async () => {
      for (const [, url] of processes()) {
        expectApiError(await sendRaw(url, 'GET', '/v1/methods'), 401, 'unauthorized');
        expectApiError(
          await sendRaw(url, 'POST', '/v1/invoices', {
            body: JSON.stringify({ amount: '10.00', orderId: orderId() }),
            headers: { 'content-type': 'application/json' },
          }),
          401,
          'unauthorized',
        );
      }
    });

    it('X-Timestamp and X-Signature without X-Public-Id', async () => {
      const r = await signedGet(a.baseUrl, signer(shop, 'test', shopSecret), '/v1/methods', { omit: ['x-public-id'] });
      expectApiError(r, 401, 'unauthorized');
    });

    it.each([
      ['an unknown pk_test_ key', () => `pk_test_${'A'.repeat(24)}`],
      ['an unknown pk_live_ key', () => `pk_live_${'B'.repeat(24)}`],
      ['an empty X-Public-Id', () => ''],
      ['a key without the pk_ prefix', () => shop.keys.test.publicKey.replace(/^pk_test_/, '')],
      ['a key with another prefix (pk_prod_)', () => shop.keys.test.publicKey.replace(/^pk_test_/, 'pk_prod_')],
      ['the live key under the test prefix', () => shop.keys.live.publicKey.replace(/^pk_live_/, 'pk_test_')],
      ['the test key under the live prefix', () => shop.keys.test.publicKey.replace(/^pk_test_/, 'pk_live_')],
      ['the secret key in X-Public-Id', () => shop.keys.test.secretKey],
      ['the public key in another case', () => shop.keys.test.publicKey.toUpperCase()],
      ['the public key with a suffix', () => `${shop.keys.test.publicKey}x`],
    ])('%s → 401 unauthorized, even with a correct signature', async (_, publicId) => {
      for (const [, url] of processes()) {
        const r = await signedGet(url, { publicId: publicId(), secret: shopSecret }, '/v1/methods');
        expectApiError(r, 401, 'unauthorized');
      }
    });

    it('a public key is not a bearer key', async () => {
      expectApiError(await api(a.baseUrl, shop.keys.test.publicKey).get('/v1/methods'), 401, 'unauthorized');
    });
  });

  describe('401 timestamp_invalid: missing or not unix seconds', () => {
    it('a missing X-Timestamp', async () => {
      for (const [, url] of processes()) {
        const r = await signedGet(url, signer(shop, 'test', shopSecret), '/v1/methods', { omit: ['x-timestamp'] });
        expectApiError(r, 401, 'timestamp_invalid');
      }
    });

    it.each<[string, (now: number) => string]>([
      ['empty', () => ''],
      ['not a number', () => 'abc'],
      ['a float', (now) => `${now}.5`],
      ['a float with .0', (now) => `${now}.0`],
      ['negative', (now) => `-${now}`],
      ['with a plus sign', (now) => `+${now}`],
      ['in exponent form', () => '1.7e9'],
      ['in hexadecimal', (now) => `0x${now.toString(16)}`],
      ['an ISO date', (now) => new Date(now * 1000).toISOString()],
      ['an HTTP date', (now) => new Date(now * 1000).toUTCString()],
      ['milliseconds', (now) => String(now * 1000)],
      ['microseconds', (now) => String(now * 1_000_000)],
      ['zero', () => '0'],
      ['digits and letters', (now) => `${now}s`],
      ['a number with a comma', (now) => `${now},0`],
      ['with a trailing dot', (now) => `${now}.`],
      ['thirteen digits', (now) => `0${now * 100}`],
    ])('an X-Timestamp that is %s (correctly signed) → 401 timestamp_invalid', async (_, make) => {
      const timestamp = make(clock.nowSeconds());
      for (const [, url] of processes()) {
        const r = await sendSigned(url, { method: 'GET', path: '/v1/methods', publicId: shop.keys.test.publicKey, secret: shopSecret, timestamp });
        expectApiError(r, 401, 'timestamp_invalid');
      }
    });

    it('a wrong signature out of the window is told about the timestamp first (security.md: judged without the secret)', async () => {
      const timestamp = clock.nowSeconds() - 400;
      for (const [, url] of processes()) {
        const r = await sendSigned(url, {
          method: 'GET',
          path: '/v1/methods',
          publicId: shop.keys.test.publicKey,
          secret: shopSecret,
          timestamp,
          signature: 'ab'.repeat(32),
        });
        expectApiError(r, 401, 'timestamp_invalid');
        expect({ param: r.body.error.param, serverTimeAhead: Number(r.headers.get('x-server-time')) - timestamp >= 400 }).toEqual({
          param: undefined,
          serverTimeAhead: true,
        });
      }
    });
  });

  describe('the ±300 s window on the gateway clock (CLOCK=manual)', () => {
    /**
     * A signed POST /v1/invoices (a fresh body, so never a replay) with X-Timestamp =
     * the gateway's current unix second + delta. Sent 50–400 ms into a second and
     * checked to have been answered within that same second; otherwise tried again.
     */
    async function createAt(delta: number, baseUrl: string): Promise<Reply> {
      for (let attempt = 0; attempt < 4; attempt++) {
        await clock.phase(50, 400);
        const second = clock.nowSeconds();
        const body = JSON.stringify({ amount: '10.00', orderId: orderId(`edge${delta}`) });
        const r = await sendSigned(baseUrl, {
          method: 'POST',
          path: '/v1/invoices',
          body,
          publicId: shop.keys.test.publicKey,
          secret: shopSecret,
          timestamp: second + delta,
        });
        if (clock.nowSeconds() === second) return r;
      }
      throw new Error('could not send a request within one second of the gateway clock');
    }

    it.each([
      [-299, 201],
      [299, 201],
      [-302, 401],
      [302, 401],
    ])('X-Timestamp = now %p s → %p (well inside/outside the window)', async (delta, status) => {
      for (const [, url] of processes()) {
        const r = await createAt(delta, url);
        if (status === 401) expectApiError(r, 401, 'timestamp_invalid');
        else expectStatus(r, status);
      }
    });

    it.each([
      [300, 201],
      [-300, 201],
      [301, 401],
      [-301, 401],
    ])('X-Timestamp = now %p s exactly → %p (the edge of ±300 s, in unix seconds)', async (delta, status) => {
      for (const [, url] of processes()) {
        const r = await createAt(delta, url);
        if (status === 401) expectApiError(r, 401, 'timestamp_invalid');
        else expectStatus(r, status);
      }
    });

    it('the window follows the gateway clock, not the system clock: advancing it makes a current timestamp stale', async () => {
      const realNow = Math.floor(Date.now() / 1000);
      await advanceBoth(400);
      for (const [, url] of processes()) {
        // The real time is 400 s behind the gateway now: refused.
        const stale = JSON.stringify({ amount: '10.00', orderId: orderId('stale') });
        const r = await sendSigned(url, {
          method: 'POST',
          path: '/v1/invoices',
          body: stale,
          publicId: shop.keys.test.publicKey,
          secret: shopSecret,
          timestamp: realNow,
        });
        expectApiError(r, 401, 'timestamp_invalid');
        // The gateway's time: accepted.
        const fresh = JSON.stringify({ amount: '10.00', orderId: orderId('fresh') });
        expectStatus(
          await sendSigned(url, {
            method: 'POST',
            path: '/v1/invoices',
            body: fresh,
            publicId: shop.keys.test.publicKey,
            secret: shopSecret,
            timestamp: clock.nowSeconds(),
          }),
          201,
        );
      }
    });
  });

  describe('401 signature_invalid: a signature that does not match', () => {
    const body = () => JSON.stringify({ amount: '10.00', orderId: orderId('badsig') });

    it.each<[string, (ts: number, raw: string) => Partial<SignedRequest>]>([
      ['no signature header', () => ({ omit: ['signature'] })],
      ['an empty signature', () => ({ signature: '' })],
      ["signed with another project's webhook secret", (ts, raw) => ({ signature: signRequest(otherSecret, ts, raw) })],
      ['signed with the secret key instead of the webhook secret', (ts, raw) => ({ signature: signRequest(shop.keys.test.secretKey, ts, raw) })],
      ['signed with the public key', (ts, raw) => ({ signature: signRequest(shop.keys.test.publicKey, ts, raw) })],
      ['signed over another timestamp', (ts, raw) => ({ signature: signRequest(shopSecret, ts - 1, raw) })],
      ['signed over the body alone', (_, raw) => ({ signature: createHmac('sha256', shopSecret).update(raw).digest('hex') })],
      ['signed over another body', (ts) => ({ signature: signRequest(shopSecret, ts, body()) })],
      ['signed over the body with a trailing newline', (ts, raw) => ({ signature: signRequest(shopSecret, ts, `${raw}\n`) })],
      ['signed without the dot', (ts, raw) => ({ signature: createHmac('sha256', shopSecret).update(`${ts}${raw}`).digest('hex') })],
      ['truncated to 63 hex digits', (ts, raw) => ({ signature: signRequest(shopSecret, ts, raw).slice(0, 63) })],
      ['with an extra hex digit', (ts, raw) => ({ signature: `${signRequest(shopSecret, ts, raw)}0` })],
      ['64 characters that are not hex', () => ({ signature: 'z'.repeat(64) })],
      ['base64 instead of hex', (ts, raw) => ({ signature: Buffer.from(signRequest(shopSecret, ts, raw), 'hex').toString('base64') })],
      ['in the webhook form sha256=<hex>', (ts, raw) => ({ signature: `sha256=${signRequest(shopSecret, ts, raw)}` })],
      ['HMAC-SHA1', (ts, raw) => ({ signature: createHmac('sha1', shopSecret).update(`${ts}.${raw}`).digest('hex') })],
      ['a plain SHA-256 of the string', (ts, raw) => ({ signature: createHash('sha256').update(`${ts}.${raw}`).digest('hex') })],
    ])('%s → 401 signature_invalid, nothing created', async (_, change) => {
      for (const [, url] of processes()) {
        const raw = body();
        const ts = freshTimestamp();
        const r = await sendSigned(url, {
          method: 'POST',
          path: '/v1/invoices',
          body: raw,
          publicId: shop.keys.test.publicKey,
          secret: shopSecret,
          timestamp: ts,
          ...change(ts, raw),
        });
        expectApiError(r, 401, 'signature_invalid');
        // The orderId stays free (another amount would be a 409 if it had been stored).
        const { orderId: id } = JSON.parse(raw);
        expectStatus(await shop.test.post('/v1/invoices', { amount: '99.00', orderId: id }), 201);
      }
    });

    it('a GET signed over a body it does not have', async () => {
      const r = await signedGet(a.baseUrl, signer(shop, 'test', shopSecret), '/v1/methods', { signedBody: '{}' });
      expectApiError(r, 401, 'signature_invalid');
    });

    it("the right signature of another project's key, under this project's public key", async () => {
      const ts = freshTimestamp();
      const r = await sendSigned(a.baseUrl, { method: 'GET', path: '/v1/methods', publicId: other.keys.test.publicKey, secret: shopSecret, timestamp: ts });
      expectApiError(r, 401, 'signature_invalid');
    });
  });

  describe('replays: each signature is accepted once, in whichever process', () => {
    it('a repeated signed GET → 401 signature_invalid in the same process and in the other one', async () => {
      const s = signer(shop, 'test', shopSecret);
      const ts = String(freshTimestamp());
      const headers = { 'x-public-id': s.publicId, 'x-timestamp': ts, 'x-signature': signRequest(s.secret, ts, '') };
      expectStatus(await sendRaw(a.baseUrl, 'GET', '/v1/methods', { headers }), 200);
      expectApiError(await sendRaw(a.baseUrl, 'GET', '/v1/methods', { headers }), 401, 'signature_invalid');
      expectApiError(await sendRaw(b.baseUrl, 'GET', '/v1/methods', { headers }), 401, 'signature_invalid');
    });

    it('a signed POST repeated on the other process → 401 signature_invalid, not an idempotent 200', async () => {
      const s = signer(shop, 'test', shopSecret);
      const raw = JSON.stringify({ amount: '10.00', orderId: orderId('replay') });
      const ts = String(freshTimestamp());
      const headers = { 'x-public-id': s.publicId, 'x-timestamp': ts, 'x-signature': signRequest(s.secret, ts, raw), 'content-type': 'application/json' };
      expectStatus(await sendRaw(a.baseUrl, 'POST', '/v1/invoices', { headers, body: raw }), 201);
      expectApiError(await sendRaw(b.baseUrl, 'POST', '/v1/invoices', { headers, body: raw }), 401, 'signature_invalid');
      expectApiError(await sendRaw(a.baseUrl, 'POST', '/v1/invoices', { headers, body: raw }), 401, 'signature_invalid');
    });

    it('a replay cannot slip through under the Signature header or in upper-case hex', async () => {
      const s = signer(shop, 'test', shopSecret);
      const ts = String(freshTimestamp());
      const signature = signRequest(s.secret, ts, '');
      const base = { 'x-public-id': s.publicId, 'x-timestamp': ts };
      expectStatus(await sendRaw(a.baseUrl, 'GET', '/v1/balance', { headers: { ...base, 'x-signature': signature } }), 200);
      for (const [, url] of processes()) {
        expectApiError(await sendRaw(url, 'GET', '/v1/balance', { headers: { ...base, signature } }), 401, 'signature_invalid');
        expectApiError(await sendRaw(url, 'GET', '/v1/balance', { headers: { ...base, 'x-signature': signature.toUpperCase() } }), 401, 'signature_invalid');
        expectApiError(await sendRaw(url, 'GET', '/v1/methods', { headers: { ...base, 'x-signature': signature } }), 401, 'signature_invalid');
      }
    });

    it('the signed string names neither the key, the method nor the path: one timestamp of GET is one use for the whole project', async () => {
      // Spec rule 1 (`<timestamp>.` for GET) with rule 2 (each signature once) and one
      // webhook secret per project: a second GET in the same second, even with the
      // other mode's key and to another path, carries the same signature and is a repeat.
      const ts = String(freshTimestamp());
      const signature = signRequest(shopSecret, ts, '');
      expectStatus(
        await sendRaw(a.baseUrl, 'GET', '/v1/methods', { headers: { 'x-public-id': shop.keys.test.publicKey, 'x-timestamp': ts, 'x-signature': signature } }),
        200,
      );
      expectApiError(
        await sendRaw(b.baseUrl, 'GET', '/v1/balance', { headers: { 'x-public-id': shop.keys.live.publicKey, 'x-timestamp': ts, 'x-signature': signature } }),
        401,
        'signature_invalid',
      );
    });

    it('20 copies of one signed request sent at once to both processes: exactly one is accepted', async () => {
      const s = signer(shop, 'test', shopSecret);
      const raw = JSON.stringify({ amount: '10.00', orderId: orderId('race') });
      const ts = String(freshTimestamp());
      const headers = { 'x-public-id': s.publicId, 'x-timestamp': ts, 'x-signature': signRequest(s.secret, ts, raw), 'content-type': 'application/json' };
      const replies = await Promise.all(
        Array.from({ length: 20 }, (_, i) => sendRaw(i % 2 === 0 ? a.baseUrl : b.baseUrl, 'POST', '/v1/invoices', { headers, body: raw })),
      );
      expect(replies.filter((r) => r.status === 201)).toHaveLength(1);
      for (const r of replies.filter((x) => x.status !== 201)) expectApiError(r, 401, 'signature_invalid');
    });

    it("5 copies of one signed request at once: one accepted, 4 × 401 signature_invalid, the key's rate counted once", async () => {
      const m = await opA.merchant({ name: 'Копии' });
      const s = signer(m, 'test', await webhookSecretOf(m.projectId));
      const keyId = (await db.pool.query<{ id: string }>('SELECT id FROM api_keys WHERE public_key = $1', [s.publicId])).rows[0]!.id;
      const hitsOf = async (): Promise<number> =>
        Number((await db.pool.query('SELECT COALESCE(SUM(hits), 0) AS hits FROM rate_limit_windows WHERE key_id = $1', [keyId])).rows[0].hits);
      const raw = JSON.stringify({ amount: '10.00', orderId: orderId('copies') });
      const ts = String(freshTimestamp());
      const signature = signRequest(s.secret, ts, raw);
      const headers = { 'x-public-id': s.publicId, 'x-timestamp': ts, 'x-signature': signature, 'content-type': 'application/json' };
      const before = await hitsOf();
      // Every copy's record of the signature waits on a lock the test holds until all five are there: each copy was judged before any record.
      const holder = new Client({ connectionString: db.url });
      await holder.connect();
      try {
        await holder.query('SELECT pg_advisory_lock($1)', [HOLD_SIGNATURE]);
        await db.pool.query(`CREATE OR REPLACE FUNCTION hold_signature() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN PERFORM pg_advisory_xact_lock(${HOLD_SIGNATURE}); RETURN NEW; END $$`);
        await db.pool.query(`CREATE TRIGGER hold_signature BEFORE INSERT ON used_signatures FOR EACH ROW
          WHEN (NEW.signature = '${signature.toLowerCase()}') EXECUTE FUNCTION hold_signature()`);
        const sent = Promise.all(Array.from({ length: 5 }, () => sendRaw(a.baseUrl, 'POST', '/v1/invoices', { headers, body: raw })));
        await poll(
          async () => (await db.pool.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1`, [HOLD_SIGNATURE])).rowCount,
          (n) => n === 5,
          'five copies recording the signature',
        );
        await holder.query('SELECT pg_advisory_unlock($1)', [HOLD_SIGNATURE]);
        const replies = await sent;
        expect(replies.filter((r) => r.status === 201)).toHaveLength(1);
        for (const r of replies.filter((x) => x.status !== 201)) expectApiError(r, 401, 'signature_invalid');
        expect((await hitsOf()) - before).toBe(1);
      } finally {
        await holder.query('SELECT pg_advisory_unlock_all()');
        await db.pool.query('DROP TRIGGER IF EXISTS hold_signature ON used_signatures');
        await holder.end();
      }
    });

    it('a refused request (bad timestamp or bad signature) does not use up the signature', async () => {
      const s = signer(shop, 'test', shopSecret);
      const raw = JSON.stringify({ amount: '10.00', orderId: orderId('unused') });
      const ts = String(freshTimestamp());
      const signature = signRequest(s.secret, ts, raw);
      const headers = { 'x-public-id': s.publicId, 'x-timestamp': ts, 'x-signature': signature, 'content-type': 'application/json' };
      // The same signature sent with a body it does not match: refused, and not recorded as used.
      expectApiError(await sendRaw(a.baseUrl, 'POST', '/v1/invoices', { headers, body: `${raw} ` }), 401, 'signature_invalid');
      expectStatus(await sendRaw(b.baseUrl, 'POST', '/v1/invoices', { headers, body: raw }), 201);
    });
  });

  describe('a request refused 429 did not use its signature', () => {
    it('a signed POST refused for the rate is accepted when resent byte for byte after Retry-After; a replay of it then is 401', async () => {
      const m = await opA.merchant({ name: 'Окно' });
      const s = signer(m, 'test', await webhookSecretOf(m.projectId));
      const keyId = (await db.pool.query<{ id: string }>('SELECT id FROM api_keys WHERE public_key = $1', [s.publicId])).rows[0]!.id;
      // The key's windows of the next seconds are already full (its other requests).
      const second = clock.nowSeconds();
      await db.pool.query(
        `INSERT INTO rate_limit_windows (key_id, window_second, hits) SELECT $1, w, 1000 FROM generate_series($2::bigint - 2, $2::bigint + 5) AS w`,
        [keyId, second],
      );
      const raw = JSON.stringify({ amount: '10.00', orderId: orderId('limited') });
      const ts = String(freshTimestamp());
      const headers = { 'x-public-id': s.publicId, 'x-timestamp': ts, 'x-signature': signRequest(s.secret, ts, raw), 'content-type': 'application/json' };
      const refused = await sendRaw(a.baseUrl, 'POST', '/v1/invoices', { headers, body: raw });
      expectApiError(refused, 429, 'rate_limited');
      expect(refused.headers.get('retry-after')).toBe('1');
      // Past the full windows: the very same bytes, in either process.
      await advanceBoth(10);
      expectStatus(await sendRaw(b.baseUrl, 'POST', '/v1/invoices', { headers, body: raw }), 201);
      expectApiError(await sendRaw(a.baseUrl, 'POST', '/v1/invoices', { headers, body: raw }), 401, 'signature_invalid');
    });
  });

  describe('revocation: a rotated key stops at once in both processes', () => {
    it('after keys/rotate the old public key is 401 unauthorized everywhere; the new one works; the other mode is untouched', async () => {
      const m = await opA.merchant({ name: 'Ротация' });
      const secret = await webhookSecretOf(m.projectId);
      for (const [, url] of processes()) expectStatus(await signedGet(url, signer(m, 'test', secret), '/v1/methods'), 200);

      const rotated = await opA.http.post(`/admin/v1/projects/${m.projectId}/keys/rotate`, { mode: 'test' });
      expectStatus(rotated, 201);
      expect(rotated.body.publicKey).toMatch(/^pk_test_/);
      expect(rotated.body.publicKey).not.toBe(m.keys.test.publicKey);

      // No waiting: the very next request in either process.
      const secretAfter = await webhookSecretOf(m.projectId);
      for (const [, url] of processes()) {
        expectApiError(await signedGet(url, { publicId: m.keys.test.publicKey, secret: secretAfter }, '/v1/methods'), 401, 'unauthorized');
        expectApiError(await api(url, m.keys.test.secretKey).get('/v1/methods'), 401, 'unauthorized');
        expectStatus(await signedGet(url, { publicId: rotated.body.publicKey, secret: secretAfter }, '/v1/methods'), 200);
        expectStatus(await api(url, rotated.body.secretKey).get('/v1/methods'), 200);
        expectStatus(await signedGet(url, signer(m, 'live', secretAfter), '/v1/methods'), 200);
      }
    });

    it('a rotation through process B stops the key in process A at once', async () => {
      const m = await opA.merchant({ name: 'Ротация Б' });
      const secret = await webhookSecretOf(m.projectId);
      expectStatus(await signedGet(a.baseUrl, signer(m, 'live', secret), '/v1/methods'), 200);
      expectStatus(await opB.http.post(`/admin/v1/projects/${m.projectId}/keys/rotate`, { mode: 'live' }), 201);
      expectApiError(await signedGet(a.baseUrl, signer(m, 'live', secret), '/v1/methods'), 401, 'unauthorized');
    });
  });

  describe('modes and projects never meet', () => {
    let liveInvoice: string;
    let testInvoice: string;

    beforeAll(async () => {
      const live = await shop.live.post('/v1/invoices', { amount: '100.00', orderId: orderId('live-only') });
      expectStatus(live, 201);
      liveInvoice = live.body.id;
      const test = await shop.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('test-only') });
      expectStatus(test, 201);
      testInvoice = test.body.id;
    });

    it('a pk_test signature cannot see a live invoice, nor pk_live a test one (404 invoice_not_found)', async () => {
      for (const [, url] of processes()) {
        expectApiError(await signedGet(url, signer(shop, 'test', shopSecret), `/v1/invoices/${liveInvoice}`), 404, 'invoice_not_found');
        expectApiError(await signedGet(url, signer(shop, 'live', shopSecret), `/v1/invoices/${testInvoice}`), 404, 'invoice_not_found');
        const own = await signedGet(url, signer(shop, 'live', shopSecret), `/v1/invoices/${liveInvoice}`);
        expectStatus(own, 200);
        expect(own.body).toMatchObject({ id: liveInvoice, isTest: false });
      }
    });

    it('another project, correctly signed with its own key and secret, cannot see the invoices (404)', async () => {
      for (const [, url] of processes()) {
        expectApiError(await signedGet(url, signer(other, 'test', otherSecret), `/v1/invoices/${testInvoice}`), 404, 'invoice_not_found');
        expectApiError(await signedGet(url, signer(other, 'live', otherSecret), `/v1/invoices/${liveInvoice}`), 404, 'invoice_not_found');
      }
    });

    it("this project's public key with another project's secret → 401 signature_invalid", async () => {
      expectApiError(
        await signedGet(b.baseUrl, { publicId: shop.keys.live.publicKey, secret: otherSecret }, `/v1/invoices/${liveInvoice}`),
        401,
        'signature_invalid',
      );
    });

    it("a signed list shows only the key's own mode and project", async () => {
      // GET /v1/invoices reads the read model, which no process here feeds; an empty,
      // well-formed page for another project is what matters.
      const r = await signedGet(a.baseUrl, signer(other, 'test', otherSecret), '/v1/invoices');
      expectStatus(r, 200);
      expect(r.body.items.map((i: Json) => i.id)).not.toContain(testInvoice);
    });
  });

  describe('the replay store outlives the timestamp window', () => {
    it('a signature with a timestamp 300 s ahead, replayed 599 s later (still inside its window), is refused', async () => {
      const s = signer(shop, 'test', shopSecret);
      let ts = 0;
      let first: Reply | null = null;
      for (let attempt = 0; attempt < 4 && first === null; attempt++) {
        await clock.phase(50, 400);
        const second = clock.nowSeconds();
        ts = second + 300;
        const r = await sendRaw(a.baseUrl, 'GET', '/v1/balance', {
          headers: { 'x-public-id': s.publicId, 'x-timestamp': String(ts), 'x-signature': signRequest(s.secret, ts, '') },
        });
        if (clock.nowSeconds() === second) first = r;
      }
      expectStatus(first!, 200);
      // 599 s later the timestamp is 299.x s in the past: still inside ±300 s, so only the
      // replay store can refuse it (each process also sweeps it on this request).
      await advanceBoth(599);
      for (const [, url] of processes()) {
        const r = await sendRaw(url, 'GET', '/v1/balance', {
          headers: { 'x-public-id': s.publicId, 'x-timestamp': String(ts), 'x-signature': signRequest(s.secret, ts, '') },
        });
        expectApiError(r, 401, 'signature_invalid');
      }
    });
  });
});
