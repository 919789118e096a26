/**
 * The SDK's retry rules against a local stub server that answers as each test scripts
 * (503, 429 with Retry-After, a dropped connection, then 200): every attempt is counted
 * on the server, the waits are recorded through the client's injectable sleep (no
 * timed assertion), and the headers of each attempt are kept. The spec: retry 429 after
 * Retry-After, 500/503/network failures with a delay growing from 250 ms, at most 4
 * retries; never 400/401/403/404/409/422; a POST only when a repeat cannot act twice.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { inspect } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { AddressInfo } from 'node:net';
import {
  MAX_TIMESTAMP_LEAD_SECONDS,
  MAX_WAIT_SECONDS,
  MAYBE_WRITTEN_MARK,
  PaymentGatewayClient,
  PaymentGatewayConnectionError,
  PaymentGatewayError,
  retryDelayMs,
  signRequest,
} from '../../libs/sdk/src';
import { AppendOutcomeUnknownError, EventStoreUnavailableError } from '../../libs/event-store/src';
import { WriteOutcomeUnknownError } from '#platform/database';
import { MAYBE_WRITTEN_MARK as GATEWAY_MARK, toApiError } from '../../apps/api/src/http/errors/error.filter';

/** An answer (`raw`: a body sent as it is, not as JSON), or a dropped connection. */
type Scripted = { status: number; body?: unknown; raw?: string; headers?: Record<string, string> } | 'drop';

interface Attempt {
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

interface Stub {
  readonly baseUrl: string;
  readonly attempts: Attempt[];
  script(...answers: Scripted[]): void;
  close(): Promise<void>;
}

async function startStub(): Promise<Stub> {
  const attempts: Attempt[] = [];
  let answers: Scripted[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      attempts.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const answer = answers.shift() ?? { status: 500, body: { error: { code: 'internal', message: 'нет ответа в сценарии' } } };
      if (answer === 'drop') {
        req.socket.destroy();
        return;
      }
      res
        .writeHead(answer.status, { 'content-type': 'application/json', ...(answer.headers ?? {}) })
        .end(answer.raw ?? (answer.body === undefined ? '' : JSON.stringify(answer.body)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    attempts,
    script: (...a) => {
      answers = a;
      attempts.length = 0;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const error = (status: number, code: string, extra: Record<string, unknown> = {}, headers?: Record<string, string>): Scripted => ({
  status,
  body: { error: { code, message: 'Ошибка', ...extra } },
  ...(headers ? { headers } : {}),
});

const BALANCE = { available: '10.00', pending: '0.00', reserved: '0.00', currency: 'RUB' };
const REFUND = {
  id: 'rf_1',
  invoiceId: '00000000-0000-4000-8000-000000000001',
  amount: '10.00',
  currency: 'RUB',
  status: 'pending',
  createdAt: '2026-11-23T00:00:00Z',
};

/** Collects garbage (V8's own gc, exposed here), then lets finalizers run. */
async function collected(): Promise<void> {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  await new Promise((resolve) => setTimeout(resolve, 10));
}

/**
 * A gateway that keeps the spec's HMAC rules: a timestamp within ±300 s of its clock
 * (else 401 timestamp_invalid with X-Server-Time), each signature taken once (else 401
 * signature_invalid with param X-Timestamp). `delay` says how long each answer takes (by timestamp and verdict).
 */
async function signatureGateway(clock: () => number, delay: (t: number, taken: boolean) => number = () => 0) {
  const taken = new Set<string>();
  const log: string[] = [];
  const server = http.createServer((req, res) => {
    const t = Number(req.headers['x-timestamp']);
    const signature = String(req.headers['x-signature']);
    const inWindow = Math.abs(t - clock()) <= 300;
    const fresh = inWindow && !taken.has(signature);
    if (fresh) taken.add(signature);
    const [status, body, headers]: [number, unknown, Record<string, string>] = !inWindow
      ? [401, { error: { code: 'timestamp_invalid', message: 'x' } }, { 'x-server-time': String(clock()) }]
      : fresh
        ? [200, BALANCE, {}]
        : [401, { error: { code: 'signature_invalid', message: 'x', param: 'X-Timestamp' } }, {}];
    log.push(`${t - clock()}:${status === 200 ? 'ok' : (body as { error: { code: string } }).error.code}`);
    setTimeout(() => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body)), delay(t, fresh));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    log,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('SDK retry rules (local stub server, injected sleep)', () => {
  let stub: Stub;
  let waits: number[];
  const client = (extra: Partial<ConstructorParameters<typeof PaymentGatewayClient>[0]> = {}) =>
    new PaymentGatewayClient({
      baseUrl: stub.baseUrl,
      auth: { secretKey: 'sk_test_stub' },
      sleep: async (ms) => {
        waits.push(ms);
      },
      ...extra,
    });
  /** An HMAC client on a clock of its own that starts at `start` ms and moves by `step(ms)` at each wait. */
  const signingOnClock = (start: number, step: (ms: number) => number) => {
    let now = start;
    return client({
      auth: { publicId: 'pk_test_stub', signingSecret: secret },
      now: () => now,
      sleep: async (ms) => {
        waits.push(ms);
        now += step(ms);
      },
    });
  };

  /** The error of a call the stub answers once with `answers`: one request, not retried (nothing says it failed), none sent on to a redirect's Location. */
  const failsAtOnce = async (call: () => Promise<unknown>, ...answers: Scripted[]): Promise<PaymentGatewayError> => {
    stub.script(...answers);
    const e = await call().catch((error: unknown) => error);
    expect(e).toBeInstanceOf(PaymentGatewayError);
    expect(stub.attempts).toHaveLength(1);
    return e as PaymentGatewayError;
  };

  beforeAll(async () => {
    stub = await startStub();
  });
  afterAll(() => stub.close());
  /**
   * The HMAC secret of the test: clients of one secret share what timestamps they used (a
   * project's test and live keys), so each test, with its own fixed clock, has its own.
   */
  let secret = '';
  let tests = 0;
  beforeEach(() => {
    secret = `whsec_${++tests}`;
    waits = [];
  });

  it('503 and 500 are retried with waits of 250 ms then 500 ms, then the 200 is the answer', async () => {
    stub.script(error(503, 'provider_unavailable'), error(500, 'internal'), { status: 200, body: BALANCE });
    await expect(client().getBalance()).resolves.toEqual(BALANCE);
    expect(stub.attempts).toHaveLength(3);
    expect(waits).toEqual([250, 500]);
    expect(stub.attempts.every((a) => a.headers.authorization === 'Bearer sk_test_stub')).toBe(true);
  });

  it('429 waits exactly Retry-After seconds', async () => {
    stub.script(error(429, 'rate_limited', {}, { 'retry-after': '2' }), error(429, 'rate_limited', {}, { 'retry-after': '0' }), { status: 200, body: BALANCE });
    await expect(client().getBalance()).resolves.toEqual(BALANCE);
    expect(stub.attempts).toHaveLength(3);
    expect(waits).toEqual([2000, 0]);
  });

  it('a Retry-After longer than MAX_WAIT_SECONDS (60) is not slept: the error is thrown at once and carries it', async () => {
    expect(MAX_WAIT_SECONDS).toBe(60);
    stub.script(error(429, 'rate_limited', {}, { 'retry-after': '999999' }), { status: 200, body: BALANCE });
    const failure = await client()
      .getBalance()
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(PaymentGatewayError);
    expect(failure).toMatchObject({ status: 429, code: 'rate_limited', retryAfterSeconds: 999999, attempts: 1 });
    expect(waits).toEqual([]);
    // 60 s is waited, 61 s is not.
    stub.script(error(429, 'rate_limited', {}, { 'retry-after': '60' }), error(429, 'rate_limited', {}, { 'retry-after': '61' }));
    await expect(client().getBalance()).rejects.toMatchObject({ status: 429, retryAfterSeconds: 61, attempts: 2 });
    expect(waits).toEqual([60_000]);
  });

  it("a 503's Retry-After is waited when longer than the growing delay (a read model rebuilt: 5 s), and bounded like a 429's", async () => {
    const rebuilding = (seconds: string) => error(503, 'provider_unavailable', {}, { 'retry-after': seconds });
    stub.script(rebuilding('5'), rebuilding('5'), rebuilding('1'), rebuilding('1'), { status: 200, body: BALANCE });
    await expect(client().getBalance()).resolves.toEqual(BALANCE);
    // max(250, 5000), max(500, 5000), max(1000, 1000), max(2000, 1000)
    expect(waits).toEqual([5000, 5000, 1000, 2000]);
    waits = [];
    stub.script(rebuilding('61'), { status: 200, body: BALANCE });
    await expect(client().getBalance()).rejects.toMatchObject({ status: 503, code: 'provider_unavailable', retryAfterSeconds: 61, attempts: 1 });
    expect(waits).toEqual([]);
  });

  it("Retry-After as an HTTP-date (a proxy's) is waited: counted from the answer's Date, else from the local clock", async () => {
    const DATE = 'Tue, 01 Dec 2026 12:00:00 GMT';
    const page = (status: number, retryAfter: string, date = DATE): Scripted => ({
      status,
      raw: '<html>Service Unavailable</html>',
      headers: { 'content-type': 'text/html', date, 'retry-after': retryAfter },
    });
    stub.script(page(503, 'Tue, 01 Dec 2026 12:00:10 GMT'), page(429, 'Tue, 01 Dec 2026 12:00:03 GMT'), { status: 200, body: BALANCE });
    await expect(client().getBalance()).resolves.toEqual(BALANCE);
    expect(waits).toEqual([10_000, 3000]);
    // The obsolete forms RFC 9110 has recipients accept; a date past is no wait.
    waits = [];
    stub.script(page(429, 'Tuesday, 01-Dec-26 12:00:02 GMT'), page(429, 'Tue Dec  1 12:00:04 2026'), page(429, 'Mon, 30 Nov 2026 12:00:00 GMT'), {
      status: 200,
      body: BALANCE,
    });
    await expect(client().getBalance()).resolves.toEqual(BALANCE);
    expect(waits).toEqual([2000, 4000, 0]);
    // Over 60 s: thrown at once, with the seconds asked.
    waits = [];
    stub.script(page(503, 'Tue, 01 Dec 2026 12:02:00 GMT'), { status: 200, body: BALANCE });
    await expect(client().getBalance()).rejects.toMatchObject({ status: 503, code: 'unexpected_response', retryAfterSeconds: 120, attempts: 1 });
    expect(waits).toEqual([]);
    // No Date header: the local clock (the client's `now`).
    const now = Date.parse(DATE);
    const answers = [new Date(now + 7000).toUTCString(), undefined];
    const noDate = client({
      now: () => now,
      fetch: async () => {
        const retryAfter = answers.shift();
        return retryAfter === undefined
          ? new Response(JSON.stringify(BALANCE), { status: 200 })
          : new Response('<html>Too Many Requests</html>', { status: 429, headers: { 'retry-after': retryAfter } });
      },
    });
    await expect(noDate.getBalance()).resolves.toEqual(BALANCE);
    expect(waits).toEqual([7000]);
  });

  it('408 request_timeout (the body did not arrive: nothing was done) is sent again like a 503', async () => {
    const timedOut = (): Scripted => error(408, 'request_timeout');
    stub.script(timedOut(), { status: 202, body: REFUND });
    await expect(client().refundInvoice(REFUND.invoiceId, { amount: '10.00' })).resolves.toEqual(REFUND);
    expect(stub.attempts).toHaveLength(2);
    expect(new Set(stub.attempts.map((a) => a.headers['idempotency-key'])).size).toBe(1);
    expect(waits).toEqual([250]);
    stub.script(...Array.from({ length: 5 }, timedOut));
    await expect(client().getBalance()).rejects.toMatchObject({ status: 408, code: 'request_timeout', attempts: 5 });
  });

  it('a dropped connection is retried like a 5xx', async () => {
    stub.script('drop', { status: 200, body: BALANCE });
    await expect(client().getBalance()).resolves.toEqual(BALANCE);
    expect(stub.attempts).toHaveLength(2);
    expect(waits).toEqual([250]);
  });

  it('gives up after 4 retries (5 attempts, waits 250, 500, 1000, 2000 ms) with the last error typed', async () => {
    stub.script(...Array.from({ length: 6 }, () => error(503, 'provider_unavailable')));
    const failure = await client()
      .getBalance()
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(PaymentGatewayError);
    expect(failure).toMatchObject({ status: 503, code: 'provider_unavailable', attempts: 5, request: 'GET /balance' });
    expect(stub.attempts).toHaveLength(5);
    expect(waits).toEqual([250, 500, 1000, 2000]);
  });

  it('network failures to the end give a PaymentGatewayConnectionError after 5 attempts', async () => {
    stub.script('drop', 'drop', 'drop', 'drop', 'drop');
    const failure = await client()
      .getBalance()
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(PaymentGatewayConnectionError);
    expect(failure).toMatchObject({ attempts: 5, request: 'GET /balance' });
    expect(waits).toEqual([250, 500, 1000, 2000]);
  });

  it.each([
    [400, 'validation', { param: 'amount', details: [{ param: 'amount', code: 'invalid_format', message: 'Сумма' }] }],
    [401, 'unauthorized', {}],
    [403, 'project_not_active', {}],
    [404, 'invoice_not_found', {}],
    [409, 'order_id_conflict', { param: 'orderId' }],
    [422, 'amount_out_of_range', { param: 'amount' }],
  ])('%i %s is never retried; the error carries code, param and details', async (status, code, extra) => {
    stub.script(error(status, code, extra), { status: 200, body: BALANCE });
    const failure = await client()
      .createInvoice({ amount: '10.00', orderId: 'o-1' })
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(PaymentGatewayError);
    expect(failure).toMatchObject({ status, code, message: 'Ошибка', attempts: 1, request: 'POST /invoices', ...extra });
    expect((failure as PaymentGatewayError).param).toBe((extra as { param?: string }).param);
    expect((failure as PaymentGatewayError).details).toEqual((extra as { details?: unknown }).details);
    expect(stub.attempts).toHaveLength(1);
    expect(waits).toEqual([]);
  });

  it('POST /invoices is retried by its orderId: the same body each time, no Idempotency-Key needed', async () => {
    stub.script(error(503, 'provider_unavailable'), { status: 201, body: { id: 'x' } });
    await client().createInvoice({ amount: '10.00', orderId: 'order-42' });
    expect(stub.attempts).toHaveLength(2);
    expect(stub.attempts.map((a) => JSON.parse(a.body).orderId)).toEqual(['order-42', 'order-42']);
    expect(stub.attempts[0]!.body).toBe(stub.attempts[1]!.body);
  });

  it('a refund carries a generated Idempotency-Key, the same on every retry; the next refund gets a new one', async () => {
    stub.script('drop', error(500, 'internal'), { status: 202, body: REFUND });
    await expect(client().refundInvoice(REFUND.invoiceId, { amount: '10.00' })).resolves.toEqual(REFUND);
    const keys = stub.attempts.map((a) => a.headers['idempotency-key']);
    expect(keys).toHaveLength(3);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(keys).size).toBe(1);

    stub.script({ status: 202, body: REFUND });
    await client().refundInvoice(REFUND.invoiceId);
    expect(stub.attempts[0]!.headers['idempotency-key']).not.toBe(keys[0]);
    expect(stub.attempts[0]!.body).toBe('{}');
  });

  it('a payout keeps the Idempotency-Key the caller gives across retries', async () => {
    stub.script(error(503, 'provider_unavailable'), { status: 201, body: { id: 1 } });
    await client().createPayout({ amount: '100.00', addressId: 1 }, { idempotencyKey: 'payout-key-1' });
    expect(stub.attempts.map((a) => a.headers['idempotency-key'])).toEqual(['payout-key-1', 'payout-key-1']);
  });

  it('a refund or payout whose retries run out: the error names the key sent on every attempt, and says the outcome is unknown', async () => {
    stub.script('drop', 'drop', 'drop', 'drop', 'drop', { status: 202, body: REFUND });
    const lost = await client()
      .refundInvoice(REFUND.invoiceId, { amount: '10.00' })
      .catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(PaymentGatewayConnectionError);
    const { idempotencyKey, message } = lost as PaymentGatewayConnectionError;
    expect(idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(stub.attempts.map((a) => a.headers['idempotency-key'])).toEqual(Array.from({ length: 5 }, () => idempotencyKey));
    expect(message).toMatch(/no answer from the gateway .*\. The outcome is unknown: the gateway may have acted\. .*the same Idempotency-Key [0-9a-f-]{36} /);
    expect(message).toContain(idempotencyKey);
    // Repeated with that key, the call is the same request.
    stub.script({ status: 202, body: REFUND });
    await expect(client().refundInvoice(REFUND.invoiceId, { amount: '10.00' }, { idempotencyKey })).resolves.toEqual(REFUND);
    expect(stub.attempts[0]!.headers['idempotency-key']).toBe(idempotencyKey);

    // A 5xx to the end (a proxy's 503 may follow a write): the typed error names the key too; the caller's own key as given.
    stub.script(...Array.from({ length: 5 }, () => error(503, 'provider_unavailable')));
    const unavailable = await client()
      .createPayout({ amount: '100.00', addressId: 1 })
      .catch((e: unknown) => e);
    expect(unavailable).toBeInstanceOf(PaymentGatewayError);
    expect((unavailable as PaymentGatewayError).idempotencyKey).toBe(stub.attempts[0]!.headers['idempotency-key']);
    stub.script('drop');
    const own = await client({ maxRetries: 0 })
      .createPayout({ amount: '100.00', addressId: 1 }, { idempotencyKey: 'payout-7' })
      .catch((e: unknown) => e);
    expect(own).toMatchObject({ idempotencyKey: 'payout-7', attempts: 1 });
    // A read did not act: no key, no such words.
    stub.script('drop');
    const read = await client({ maxRetries: 0 })
      .getBalance()
      .catch((e: unknown) => e);
    expect(read).toMatchObject({ idempotencyKey: undefined, request: 'GET /balance' });
    expect((read as Error).message).not.toMatch(/outcome/);
  });

  it('409 idempotency_key_in_use (the same key still running) is repeated with the same key after its Retry-After; other 409s are not', async () => {
    // Review 96 F7: the usual cause is the call's own first attempt outliving timeoutMs while the gateway still works on it.
    stub.script(error(409, 'idempotency_key_in_use', { param: 'Idempotency-Key' }, { 'retry-after': '1' }), { status: 202, body: REFUND });
    const refund = await client().refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'k' });
    expect(refund).toMatchObject({ id: REFUND.id });
    expect(stub.attempts.map((a) => a.headers['idempotency-key'])).toEqual(['k', 'k']);
    expect(waits).toEqual([1000]);
    // Still running after every retry: thrown with its Retry-After, and the outcome unknown (that request may act).
    const inUse = error(409, 'idempotency_key_in_use', { param: 'Idempotency-Key' }, { 'retry-after': '1' });
    stub.script(inUse, inUse, inUse, inUse, inUse);
    const failure = await client()
      .refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'k2' })
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(PaymentGatewayError);
    expect(failure).toMatchObject({ status: 409, code: 'idempotency_key_in_use', attempts: 5, retryAfterSeconds: 1, outcomeUnknown: true });
    // A 409 of the request itself is its answer: never repeated.
    stub.script(error(409, 'duplicate_request'), { status: 201, body: {} });
    await expect(client().createPayout({ amount: '100.00', addressId: 1 }, { idempotencyKey: 'k3' })).rejects.toMatchObject({
      status: 409,
      code: 'duplicate_request',
      attempts: 1,
      outcomeUnknown: false,
    });
  });

  it("a 2xx answer that is not the API's JSON (a proxy's page, an empty body) is unexpected_response; a POST's says its outcome is unknown", async () => {
    const page = (status: number): Scripted => ({ status, raw: '<html><body>Вход в сеть</body></html>', headers: { 'content-type': 'text/html' } });
    const read = await failsAtOnce(() => client().getBalance(), page(200));
    expect(read).toMatchObject({ status: 200, code: 'unexpected_response', request: 'GET /balance', attempts: 1 });
    expect(read.message).toContain('<html><body>Вход в сеть');
    expect(read.message).not.toMatch(/outcome/);
    for (const answer of [{ status: 200 }, { status: 200, raw: 'null' }, { status: 200, raw: '"ok"' }]) {
      expect(await failsAtOnce(() => client().getInvoice(REFUND.invoiceId), answer)).toMatchObject({ status: 200, code: 'unexpected_response' });
    }

    const refund = await failsAtOnce(() => client().refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'refund-key-7' }), { status: 202 });
    expect(refund).toMatchObject({ status: 202, code: 'unexpected_response', request: `POST /invoices/${REFUND.invoiceId}/refund` });
    expect(refund.message).toMatch(/empty body\. The outcome is unknown: the gateway may have acted\. .*the same Idempotency-Key refund-key-7/);
    const invoice = await failsAtOnce(() => client().createInvoice({ amount: '10.00', orderId: 'order-77' }), page(201));
    expect(invoice.message).toMatch(/The outcome is unknown.*the same orderId order-77/);
    expect(waits).toEqual([]);
  });

  it("a 2xx JSON that is not the operation's answer, a 2xx status the spec does not give it, or a redirect (not followed) is unexpected_response", async () => {
    const ok: Scripted = { status: 200, body: { status: 'ok' } };
    const list: Scripted = { status: 200, body: { items: [], nextCursor: null, hasMore: false } };
    // A proxy's JSON 200 after the gateway made the refund or invoice: neither an answer nor "it already existed".
    const refund = await failsAtOnce(() => client().refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'k-ok' }), ok);
    expect(refund).toMatchObject({ status: 200, code: 'unexpected_response', outcomeUnknown: true, idempotencyKey: 'k-ok', attempts: 1 });
    expect(refund.message).toMatch(/HTTP 200, a status this operation never answers \(only 202\).*The outcome is unknown/);
    // The refund itself with a 200: the spec gives the refund's POST a 202 only.
    await failsAtOnce(() => client().refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'k-200' }), { status: 200, body: REFUND });
    const invoice = await failsAtOnce(() => client().createInvoiceWithOutcome({ amount: '10.00', orderId: 'order-ok' }), ok);
    expect(invoice).toMatchObject({ status: 200, code: 'unexpected_response', outcomeUnknown: true });
    expect(invoice.message).toMatch(
      /HTTP 200 with JSON that is not this operation's answer \(no string id\): \{"status":"ok"\}\. The outcome is unknown.*orderId order-ok/,
    );
    await expect(failsAtOnce(() => client().createPayout({ amount: '100.00', addressId: 1 }), { status: 201, body: { id: 'x' } })).resolves.toMatchObject({
      outcomeUnknown: true,
    });
    // A 301 after the POST was forwarded: fetch once sent it on as a GET and returned the invoice list as the create's answer.
    const moved = await failsAtOnce(
      () => client().createInvoiceWithOutcome({ amount: '10.00', orderId: 'order-301' }),
      { status: 301, raw: '', headers: { location: '/v1/invoices' } },
      list,
    );
    expect(moved).toMatchObject({ status: 301, code: 'unexpected_response', outcomeUnknown: true, request: 'POST /invoices' });
    expect(moved.message).toMatch(/HTTP 301, a redirect \(to \/v1\/invoices\), not followed.*The outcome is unknown/);
    // A read: the same code, nothing to be unknown.
    expect(await failsAtOnce(() => client().getBalance(), list)).toMatchObject({ status: 200, code: 'unexpected_response', outcomeUnknown: false });
    const found = await failsAtOnce(() => client().getInvoice(REFUND.invoiceId), { status: 302, raw: '', headers: { location: '/login' } }, ok);
    expect(found).toMatchObject({ status: 302, code: 'unexpected_response', outcomeUnknown: false });
    expect(waits).toEqual([]);
  });

  it("the gateway's 503 that may have been written is told from its 503 that wrote nothing by outcomeUnknown, once the retries run out", async () => {
    // The gateway's own answers: an append whose answer was lost and not found again, and a database that did not answer.
    const answerOf = (exception: Error): Scripted => {
      const e = toApiError(exception);
      return { status: e.status, body: { error: { code: e.code, message: e.message } }, headers: { ...e.headers } };
    };
    const maybeWritten = answerOf(new AppendOutcomeUnknownError('invoice-1', { cause: new Error('connection terminated') }));
    const nothingWritten = answerOf(new EventStoreUnavailableError('connection refused'));
    const failure = async (call: () => Promise<unknown>, answer: Scripted): Promise<PaymentGatewayError> => {
      stub.script(...Array.from({ length: 5 }, () => answer));
      const e = await call().catch((error: unknown) => error);
      expect(e).toBeInstanceOf(PaymentGatewayError);
      expect(e).toMatchObject({ status: 503, code: 'provider_unavailable', attempts: 5 });
      return e as PaymentGatewayError;
    };
    const invoice = await failure(() => client().createInvoice({ amount: '10.00', orderId: 'order-503' }), maybeWritten);
    expect(invoice.outcomeUnknown).toBe(true);
    expect(invoice.message).toMatch(/\. The outcome is unknown: the gateway may have acted\. .*the same orderId order-503/);
    const refund = await failure(() => client().refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'refund-key-503' }), maybeWritten);
    expect(refund).toMatchObject({ outcomeUnknown: true, idempotencyKey: 'refund-key-503' });
    expect(refund.message).toContain('The outcome is unknown: the gateway may have acted. Make the same call with the same Idempotency-Key refund-key-503');

    const nothing = await failure(() => client().refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'refund-key-0' }), nothingWritten);
    expect(nothing.outcomeUnknown).toBe(false);
    expect(nothing.message).not.toMatch(/outcome/);
    const read = await failure(() => client().getBalance(), nothingWritten);
    expect(read.outcomeUnknown).toBe(false);
    // The gateway's 500s to the end (review 96 F4): an unexpected error, after which the gateway keeps the key, not knowing
    // what was written; a GET's is false.
    const internal = error(500, 'internal');
    stub.script(internal, internal, internal, internal, internal);
    const after500 = await client()
      .createPayout({ amount: '100.00', addressId: 1 }, { idempotencyKey: 'k-500' })
      .catch((e: unknown) => e);
    expect(after500).toMatchObject({ status: 500, attempts: 5, outcomeUnknown: true, idempotencyKey: 'k-500' });
    expect((after500 as Error).message).toContain('Make the same call with the same Idempotency-Key k-500');
    stub.script(internal, internal, internal, internal, internal);
    await expect(client().getBalance()).rejects.toMatchObject({ status: 500, attempts: 5, outcomeUnknown: false });
    // A proxy's 504 page on a POST: the same mark; a 4xx of the gateway: nothing was done.
    stub.script(...Array.from({ length: 5 }, () => ({ status: 504, raw: '<html>504 Gateway Time-out</html>' })));
    await expect(client().refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'k-504' })).rejects.toMatchObject({ status: 504, outcomeUnknown: true });
    stub.script(error(409, 'conflict'));
    await expect(client().refundInvoice(REFUND.invoiceId)).rejects.toMatchObject({ status: 409, outcomeUnknown: false });
  });

  it("the mark of a 503 that may have written is one phrase: the gateway's constant, the SDK's copy, nginx's and docs/api.md's", () => {
    const root = path.join(__dirname, '../..');
    expect(MAYBE_WRITTEN_MARK).toBe(GATEWAY_MARK);
    // deploy/nginx.conf's $unavailable_message: the write a replica got carries it, the default (nothing done) does not.
    const map = /map "\$request_method \$upstream_bytes_sent" \$unavailable_message \{\n([\s\S]*?)\n\}/.exec(
      readFileSync(path.join(root, 'deploy/nginx.conf'), 'utf8'),
    );
    const lines = map![1]!.split('\n').map((line) => line.trim());
    expect(lines.find((line) => line.startsWith('default '))).not.toContain(MAYBE_WRITTEN_MARK);
    expect(lines.find((line) => line.startsWith('"~^(POST|PATCH|PUT|DELETE)'))).toContain(MAYBE_WRITTEN_MARK);
    // The gateway's two texts of a write it could not check.
    expect(toApiError(new AppendOutcomeUnknownError('invoice-1', { cause: new Error('connection terminated') })).message).toContain(MAYBE_WRITTEN_MARK);
    expect(toApiError(new WriteOutcomeUnknownError(new Error('connection terminated'))).message).toContain(MAYBE_WRITTEN_MARK);
    // docs/api.md names exactly this phrase as the mark.
    const api = readFileSync(path.join(root, 'docs/api.md'), 'utf8');
    expect(api).toContain(`message ("${MAYBE_WRITTEN_MARK}": the SDK's and gateway's one mark)`);
  });

  it('outcomeUnknown is sticky across attempts: a later answer that wrote nothing does not clear an earlier one that may have', async () => {
    const page504: Scripted = { status: 504, raw: '<html><body>504 Gateway Time-out</body></html>', headers: { 'content-type': 'text/html' } };
    const unmarked = error(503, 'provider_unavailable', {}, { 'retry-after': '1' });
    const e = toApiError(new AppendOutcomeUnknownError('invoice-1', { cause: new Error('connection terminated') }));
    const marked: Scripted = { status: e.status, body: { error: { code: e.code, message: e.message } }, headers: { ...e.headers } };
    const inUse = error(409, 'idempotency_key_in_use', { param: 'Idempotency-Key' }, { 'retry-after': '1' });
    const refund = async (...answers: Scripted[]) => {
      stub.script(...answers);
      return (await client()
        .refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'k-sticky' })
        .catch((error: unknown) => error)) as PaymentGatewayError;
    };
    const unknownText = 'The outcome is unknown: the gateway may have acted. Make the same call with the same Idempotency-Key k-sticky';
    // A proxy's 504, then the gateway's unmarked 503s to the end: the first may have refunded.
    const after504 = await refund(page504, unmarked, unmarked, unmarked, unmarked);
    expect(after504).toMatchObject({ status: 503, attempts: 5, outcomeUnknown: true, idempotencyKey: 'k-sticky' });
    expect(after504.message).toContain(unknownText);
    // The gateway's marked 503, then unmarked ones.
    const afterMarked = await refund(marked, unmarked, unmarked, unmarked, unmarked);
    expect(afterMarked).toMatchObject({ status: 503, attempts: 5, outcomeUnknown: true });
    expect(afterMarked.message).toContain(unknownText);
    // A 504, then 409 idempotency_key_in_use to the end: the first attempt is still running under the key.
    const stillRunning = await refund(page504, inUse, inUse, inUse, inUse);
    expect(stillRunning).toMatchObject({ status: 409, code: 'idempotency_key_in_use', attempts: 5, outcomeUnknown: true });
    expect(stillRunning.message).toContain(unknownText);
    // Unmarked 503s only: nothing was done.
    const nothing = await refund(unmarked, unmarked, unmarked, unmarked, unmarked);
    expect(nothing).toMatchObject({ status: 503, attempts: 5, outcomeUnknown: false });
    expect(nothing.message).not.toMatch(/outcome/);

    // No answer: a POST's PaymentGatewayConnectionError says so in the field too (a GET's: false).
    stub.script('drop');
    await expect(client({ maxRetries: 0 }).refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'k-drop' })).rejects.toMatchObject({
      name: 'PaymentGatewayConnectionError',
      outcomeUnknown: true,
    });
    stub.script('drop');
    await expect(client({ maxRetries: 0 }).getBalance()).rejects.toMatchObject({ name: 'PaymentGatewayConnectionError', outcomeUnknown: false });
    // Aborted in the wait after a 504: unknown; after an unmarked 503: nothing was done; before sending: nothing was sent.
    const abortedAfter = async (answer: Scripted) => {
      const controller = new AbortController();
      stub.script(answer, answer);
      const aborting = client({ sleep: async () => controller.abort() });
      return aborting.refundInvoice(REFUND.invoiceId, {}, { idempotencyKey: 'k-abort', signal: controller.signal }).catch((error: unknown) => error);
    };
    expect(await abortedAfter(page504)).toMatchObject({ name: 'AbortError', attempts: 1, outcomeUnknown: true });
    expect(await abortedAfter(unmarked)).toMatchObject({ name: 'AbortError', attempts: 1, outcomeUnknown: false });
    const notSent = client().refundInvoice(REFUND.invoiceId, {}, { signal: AbortSignal.abort() });
    await expect(notSent).rejects.toMatchObject({ name: 'AbortError', attempts: 0, outcomeUnknown: false });
  });

  it('HMAC mode signs every attempt anew over "<timestamp>.<raw body>" with the moment of the attempt', async () => {
    const signing = signingOnClock(1_800_000_000_000, () => 7000);
    stub.script(error(503, 'provider_unavailable'), { status: 201, body: { id: 'x' } });
    await signing.createInvoice({ amount: '10.00', orderId: 'o-2' });
    const [first, second] = stub.attempts;
    expect(first!.headers['x-public-id']).toBe('pk_test_stub');
    expect(first!.headers.authorization).toBeUndefined();
    expect([first!.headers['x-timestamp'], second!.headers['x-timestamp']]).toEqual(['1800000000', '1800000007']);
    for (const a of [first!, second!]) expect(a.headers['x-signature']).toBe(signRequest(secret, a.headers['x-timestamp'] as string, a.body));
    expect(first!.headers['x-signature']).not.toBe(second!.headers['x-signature']);
  });

  it('HMAC mode: a 401 timestamp_invalid with X-Server-Time corrects the clock once and signs again', async () => {
    const signing = client({ auth: { publicId: 'pk_test_stub', signingSecret: secret }, now: () => 1_000_000_000_000 });
    stub.script(error(401, 'timestamp_invalid', {}, { 'x-server-time': '1000003600' }), error(401, 'timestamp_invalid', {}, { 'x-server-time': '1000007200' }));
    const failure = await signing.getBalance().catch((e: unknown) => e);
    // Corrected once (to the gateway's time), never twice: the second refusal is the answer.
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1000000000', '1000003600']);
    expect(failure).toMatchObject({ status: 401, code: 'timestamp_invalid' });
    expect(signing.clockOffsetSeconds).toBe(3600);
    expect(waits).toEqual([]);
  });

  it('HMAC mode: a clock two hours ahead is corrected and the request signed again at once, with the gateway time (no wait)', async () => {
    const signing = signingOnClock(1_000_000_000_000, (ms) => ms);
    stub.script(error(401, 'timestamp_invalid', {}, { 'x-server-time': '999992800' }), { status: 200, body: BALANCE });
    await signing.getBalance();
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1000000000', '999992800']);
    expect(signing.clockOffsetSeconds).toBe(-7200);
    expect(waits).toEqual([]);
  });

  it('HMAC mode: a request with a body already signed in this second waits for the next second (each signature is accepted once)', async () => {
    const signing = signingOnClock(1_800_000_000_500, (ms) => ms);
    const stamps = () => stub.attempts.map((a) => a.headers['x-timestamp']);
    stub.script({ status: 200, body: BALANCE }, { status: 200, body: { id: '00000000-0000-4000-8000-000000000001' } }, { status: 200, body: BALANCE });
    await signing.getBalance();
    await signing.getInvoice('00000000-0000-4000-8000-000000000001');
    await signing.getBalance();
    expect(stamps()).toEqual(['1800000000', '1800000001', '1800000002']);
    expect(new Set(stub.attempts.map((a) => a.headers['x-signature'])).size).toBe(3);
    // To the start of the next second of the clock, not ahead of it.
    expect(waits).toEqual([500, 1000]);
    // Another body has its own seconds: no wait.
    stub.script({ status: 201, body: { id: 'x' } });
    await signing.createInvoice({ amount: '1.00', orderId: 'o-3' });
    expect(stamps()).toEqual(['1800000002']);
    expect(waits).toEqual([500, 1000]);
  });

  it('HMAC mode: a 401 signature_invalid of a reused second (param X-Timestamp) is signed again in the next second, up to 3 times', async () => {
    const signing = signingOnClock(1_800_000_000_000, (ms) => ms);
    const refused = () => error(401, 'signature_invalid', { param: 'X-Timestamp' });
    stub.script(refused(), refused(), refused(), { status: 200, body: BALANCE });
    await expect(signing.getBalance()).resolves.toEqual(BALANCE);
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1800000000', '1800000001', '1800000002', '1800000003']);
    expect(waits).toEqual([1000, 1000, 1000]);
    // Refused a fourth time: the error.
    stub.script(refused(), refused(), refused(), refused(), { status: 200, body: BALANCE });
    const failure = await signing.getBalance().catch((e: unknown) => e);
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1800000004', '1800000005', '1800000006', '1800000007']);
    expect(failure).toMatchObject({ status: 401, code: 'signature_invalid', attempts: 4 });
    // A signature that does not match (param X-Signature, or none: a gateway that does not say) is thrown at once.
    for (const mismatch of [error(401, 'signature_invalid', { param: 'X-Signature' }), error(401, 'signature_invalid')]) {
      stub.script(mismatch, { status: 200, body: BALANCE });
      await expect(signing.getBalance()).rejects.toMatchObject({ status: 401, code: 'signature_invalid', attempts: 1 });
      expect(stub.attempts).toHaveLength(1);
    }
  });

  it('HMAC mode: a burst of GETs, sequential or at once, never signs a second ahead of the clock (another process would walk into it)', async () => {
    expect(MAX_TIMESTAMP_LEAD_SECONDS).toBe(0);
    let now = 1_800_000_000_250;
    const ahead: string[] = [];
    const signing = client({
      auth: { publicId: 'pk_test_stub', signingSecret: secret },
      now: () => now,
      sleep: async (ms) => {
        waits.push(ms);
        now += ms;
      },
      fetch: (input, init) => {
        const t = Number((init?.headers as Record<string, string>)['x-timestamp']);
        if (t > Math.floor(now / 1000)) ahead.push(`${t} at ${now}`);
        return fetch(input, init);
      },
    });
    stub.script(...Array.from({ length: 10 }, () => ({ status: 200, body: BALANCE })));
    for (let i = 0; i < 5; i++) await signing.getBalance();
    await Promise.all(Array.from({ length: 5 }, () => signing.getBalance()));
    const stamps = stub.attempts.map((a) => Number(a.headers['x-timestamp']));
    expect(new Set(stamps).size).toBe(10);
    expect(ahead).toEqual([]);
  });

  it('HMAC mode: an injected clock that does not move across a wait still gets a later second after each wait (no endless loop)', async () => {
    const signing = client({ auth: { publicId: 'pk_test_stub', signingSecret: secret }, now: () => 1_800_000_000_600 });
    stub.script(...Array.from({ length: 3 }, () => ({ status: 200, body: BALANCE })));
    for (let i = 0; i < 3; i++) await signing.getBalance();
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1800000000', '1800000001', '1800000002']);
    expect(waits).toEqual([400, 400, 1000]);
  });

  it("HMAC mode: a project's test and live clients in one process never sign the same timestamp and body (one secret: one signature)", async () => {
    const test = client({ auth: { publicId: 'pk_test_stub', signingSecret: secret }, now: () => 1_800_000_000_000 });
    const live = client({ auth: { publicId: 'pk_live_stub', signingSecret: secret }, now: () => 1_800_000_000_000 });
    stub.script(...Array.from({ length: 4 }, () => ({ status: 200, body: BALANCE })));
    for (const c of [test, live, test, live]) await c.getBalance();
    const signatures = stub.attempts.map((a) => a.headers['x-signature']);
    expect(new Set(signatures).size).toBe(4);
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1800000000', '1800000001', '1800000002', '1800000003']);
  });

  it('HMAC mode: a secret is remembered while a client of it lives, and forgotten once none does (a rotated secret)', async () => {
    const at = { now: () => 1_800_000_000_000 };
    stub.script(...Array.from({ length: 2 }, () => ({ status: 200, body: BALANCE })));
    await client({ auth: { publicId: 'pk_test_stub', signingSecret: secret }, ...at }).getBalance();
    // No client of the secret is left: once collected, what they used is forgotten (a new client starts afresh).
    await collected();
    await client({ auth: { publicId: 'pk_test_stub', signingSecret: secret }, ...at }).getBalance();
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1800000000', '1800000000']);
  });

  it('HMAC mode: a correction backwards keeps the timestamps of requests in flight ahead of it: the clock waits past them', async () => {
    // The client 299 s ahead, inside the window, its clock moving on (the gateway's not): three GETs at once take S+299,
    // S+300 and S+301, a second apart; S+301 is refused (timestamp_invalid), the other two taken 300 ms later. Corrected
    // to S, the refused one signs S; 299 s on, a GET must not sign S+299, S+300 or S+301 again.
    let clientMs = 1_800_000_299_000;
    let server0 = 1_800_000_000;
    const gateway = await signatureGateway(
      () => server0,
      (t, fresh) => (fresh && t > server0 + 100 ? 300 : 0),
    );
    try {
      const signing = client({
        baseUrl: gateway.baseUrl,
        auth: { publicId: 'pk_test_stub', signingSecret: secret },
        now: () => clientMs,
        sleep: async (ms) => {
          clientMs += ms;
        },
      });
      await Promise.all([signing.getBalance(), signing.getBalance(), signing.getBalance()]);
      expect(signing.clockOffsetSeconds).toBe(-301);
      clientMs += 299_000;
      server0 += 299;
      await signing.getBalance();
      await signing.getBalance();
      expect(gateway.log.filter((l) => !l.endsWith(':ok') && !l.endsWith(':timestamp_invalid'))).toEqual([]);
      expect(gateway.log.filter((l) => l.endsWith(':ok'))).toHaveLength(5);
    } finally {
      await gateway.close();
    }
  });

  it('HMAC mode: a clock correction does not forget the timestamps other requests in flight signed on the corrected clock', async () => {
    // A gateway 400 s ahead that takes each signature once. Six GETs at once on the client's clock: each is refused, learns
    // the gateway's time and signs again; a late refusal once forgot every timestamp issued on the corrected clock, and
    // two requests signed the same second (401 signature_invalid, thrown after the one retry).
    const SERVER = 1_800_000_400;
    const used = new Set<string>();
    let refused = 0;
    const gateway = http.createServer((req, res) => {
      const t = Number(req.headers['x-timestamp']);
      // The refusals come back 100 ms apart, the answers after 300 ms: later refusals meet requests already signed again.
      const answer = (status: number, body: unknown, headers: Record<string, string> = {}, ms = 300) =>
        setTimeout(() => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body)), ms);
      if (Math.abs(t - SERVER) > 300)
        return answer(401, { error: { code: 'timestamp_invalid', message: 'x' } }, { 'x-server-time': String(SERVER) }, 100 * refused++);
      const signature = String(req.headers['x-signature']);
      if (used.has(signature)) return answer(401, { error: { code: 'signature_invalid', message: 'x', param: 'X-Timestamp' } });
      used.add(signature);
      answer(200, BALANCE);
    });
    await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
    try {
      const baseUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/v1`;
      const signing = client({ baseUrl, auth: { publicId: 'pk_test_stub', signingSecret: secret }, now: () => 1_800_000_000_000 });
      const results = await Promise.allSettled(Array.from({ length: 6 }, () => signing.getBalance()));
      expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : r.status))).toEqual(Array.from({ length: 6 }, () => 'fulfilled'));
      expect(used.size).toBe(6);
    } finally {
      gateway.closeAllConnections();
      await new Promise((resolve) => gateway.close(resolve));
    }
  });

  it('HMAC mode: an offset given up front does not undo the one a client of the secret learnt (it would wait minutes)', async () => {
    let now = 1_800_000_000_000;
    const noWait = async (ms: number) => {
      throw new Error(`waited ${ms} ms`);
    };
    const first = client({ auth: { publicId: 'pk_live_stub', signingSecret: secret }, now: () => now, sleep: noWait });
    stub.script(error(401, 'timestamp_invalid', {}, { 'x-server-time': '1800000400' }), ...Array.from({ length: 3 }, () => ({ status: 200, body: BALANCE })));
    await first.getBalance();
    const configured = client({
      auth: { publicId: 'pk_test_stub', signingSecret: secret },
      now: () => now,
      clockOffsetSeconds: 0,
      sleep: noWait,
    });
    now += 1000;
    await first.getBalance();
    now += 1000;
    await configured.getBalance();
    expect([first.clockOffsetSeconds, configured.clockOffsetSeconds]).toEqual([400, 400]);
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1800000000', '1800000400', '1800000401', '1800000402']);
    expect(waits).toEqual([]);
  });

  it('HMAC mode: a client in use keeps its secret remembered however many others are made; another gateway has its own memory', async () => {
    const at = { now: () => 1_800_000_000_000 };
    stub.script(...Array.from({ length: 5 }, () => ({ status: 200, body: BALANCE })));
    const busy = client({ auth: { publicId: 'pk_test_stub', signingSecret: secret }, ...at });
    for (let round = 0; round < 2; round++) {
      await busy.getBalance();
      for (let i = 0; i < 1_200; i++) client({ auth: { publicId: 'pk_test_stub', signingSecret: `${secret}_${round}_${i}` } });
    }
    await client({ auth: { publicId: 'pk_live_stub', signingSecret: secret }, ...at }).getBalance();
    // The same server under another name is another gateway to the client: its own timestamps.
    await client({ baseUrl: stub.baseUrl.replace('127.0.0.1', 'localhost'), auth: { publicId: 'pk_test_stub', signingSecret: secret }, ...at }).getBalance();
    // The same address written otherwise (host case) is the same gateway.
    await client({ baseUrl: stub.baseUrl.replace('127.0.0.1', 'LocalHost'), auth: { publicId: 'pk_test_stub', signingSecret: secret }, ...at }).getBalance();
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1800000000', '1800000001', '1800000002', '1800000000', '1800000001']);
  });

  it('HMAC mode: a new client of a secret whose clock another client corrected signs on the corrected clock: no wait', async () => {
    // The gateway 400 s ahead: the first client learns it; a second one (a project's other key, or one made per request)
    // took that client's last timestamp as 400 s ahead of its own clock and waited 160 s before sending anything.
    const first = client({ auth: { publicId: 'pk_live_stub', signingSecret: secret }, now: () => 1_800_000_000_000 });
    stub.script(error(401, 'timestamp_invalid', {}, { 'x-server-time': '1800000400' }), { status: 200, body: BALANCE }, { status: 200, body: BALANCE });
    await first.getBalance();
    const second = client({
      auth: { publicId: 'pk_test_stub', signingSecret: secret },
      now: () => 1_800_000_001_000,
      sleep: async (ms) => {
        throw new Error(`waited ${ms} ms`);
      },
    });
    await second.getBalance();
    expect(second.clockOffsetSeconds).toBe(400);
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1800000000', '1800000400', '1800000401']);
    expect(waits).toEqual([]);
  });

  it('HMAC mode: after a clock correction no timestamp the gateway took is signed again with the same body', async () => {
    // Three GETs take S, S+1, S+2; at S+3 the gateway says its clock reads S+1. Forgetting what it took would sign
    // S+1 again at once (401 signature_invalid): each timestamp it took stays used, and the clock waits past them.
    const signing = signingOnClock(1_800_000_000_500, (ms) => ms);
    stub.script(
      ...Array.from({ length: 3 }, () => ({ status: 200, body: BALANCE })),
      error(401, 'timestamp_invalid', {}, { 'x-server-time': '1800000001' }),
      ...Array.from({ length: 3 }, () => ({ status: 200, body: BALANCE })),
    );
    for (let i = 0; i < 6; i++) await signing.getBalance();
    const stamps = stub.attempts.map((a) => Number(a.headers['x-timestamp']) - 1_800_000_000);
    expect(stamps).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(signing.clockOffsetSeconds).toBe(-2);
  });

  it('HMAC mode: a timestamp answered by a proxy (503) far outside the gateway window is not kept across the correction: no wait for it', async () => {
    // The client's clock an hour ahead; a 503 (nginx while the gateway restarts) answers first, then the gateway corrects it.
    const signing = signingOnClock(1_800_003_600_000, (ms) => ms);
    stub.script(error(503, 'provider_unavailable'), error(401, 'timestamp_invalid', {}, { 'x-server-time': '1800000000' }), { status: 200, body: BALANCE });
    await signing.getBalance();
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1800003600', '1800003601', '1800000000']);
    // The retry's 250 ms, then to the next second (S+3600 was used).
    expect(waits).toEqual([250, 750]);
  });

  it('a header value HTTP cannot carry (an Idempotency-Key in Cyrillic, a line break) is refused before anything is sent, not retried as a lost answer', async () => {
    stub.script({ status: 202, body: REFUND });
    for (const idempotencyKey of ['заказ-1', 'key\nx']) {
      const failure = await client()
        .refundInvoice(REFUND.invoiceId, { amount: '1.00' }, { idempotencyKey })
        .catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(TypeError);
      expect((failure as Error).message).toMatch(/idempotency-key header cannot carry its value .*nothing was sent/);
      expect((failure as Error).message).not.toContain(JSON.stringify(idempotencyKey).slice(1, -1));
    }
    expect(stub.attempts).toEqual([]);
    expect(waits).toEqual([]);
  });

  it('a refund whose amount is undefined (lost on the way) is refused, nothing sent: JSON would drop it and refund the whole remainder', async () => {
    stub.script({ status: 202, body: REFUND });
    const lost: string | undefined = undefined;
    const failure = await client()
      .refundInvoice(REFUND.invoiceId, { amount: lost })
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(TypeError);
    expect((failure as Error).message).toBe('refundInvoice: amount is undefined; omit it for a full refund of the remainder. Nothing was sent');
    expect(stub.attempts).toEqual([]);
    // A full refund omits it: the body {}.
    await expect(client().refundInvoice(REFUND.invoiceId)).resolves.toEqual(REFUND);
    expect(stub.attempts.map((a) => a.body)).toEqual(['{}']);
  });

  it('a newIdempotencyKey that answers no key (a forgotten return) is refused, nothing sent: the call would be retried without one', async () => {
    stub.script({ status: 202, body: REFUND });
    for (const answer of [undefined, '', 42]) {
      const failure = await client({ newIdempotencyKey: () => answer as unknown as string })
        .refundInvoice(REFUND.invoiceId, { amount: '1.00' })
        .catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(TypeError);
      expect((failure as Error).message).toMatch(/^idempotencyKey \(or newIdempotencyKey's result\): a non-empty string, got .*Nothing was sent$/);
      const payout = await client({ newIdempotencyKey: () => answer as unknown as string })
        .createPayout({ amount: '100.00', addressId: 1 })
        .catch((e: unknown) => e);
      expect(payout).toBeInstanceOf(TypeError);
    }
    expect(stub.attempts).toEqual([]);
  });

  it('an id that is empty, "." or ".." (a dot segment: another address) is refused with a TypeError naming the argument, nothing sent', async () => {
    stub.script();
    const calls: [string, () => Promise<unknown>][] = [
      ['id: ', () => client().getInvoice('.')],
      ['id: ', () => client().getRefund('..')],
      ['id: ', () => client().getEvent('')],
      ['id: ', () => client().getInvoice(undefined as unknown as string)],
      ['invoiceId: ', () => client().refundInvoice('..', { amount: '1.00' })],
      ['invoiceId: ', () => client().refundInvoiceWithOutcome('.')],
    ];
    for (const [name, call] of calls) {
      const failure = await call().catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(TypeError);
      expect((failure as Error).message).toMatch(new RegExp(`^${name}an id \\(a non-empty string other than "\\." and "\\.\\."\\), got `));
    }
    expect(stub.attempts).toEqual([]);
    // Dots inside an id are its own: sent as they are.
    stub.script({ status: 200, body: { id: 'a..b' } });
    await expect(client().getInvoice('a..b')).resolves.toEqual({ id: 'a..b' });
    expect(stub.attempts.map((a) => a.url)).toEqual(['/v1/invoices/a..b']);
  });

  it('a secret key or public id with a line break, a space at an end or a letter HTTP cannot carry is refused at construction, never shown', async () => {
    const refusal = (auth: ConstructorParameters<typeof PaymentGatewayClient>[0]['auth']): Error => {
      try {
        client({ auth });
      } catch (e) {
        return e as Error;
      }
      throw new Error('the client was made');
    };
    const keys = ['sk_live_SeCrEt42\n', 'sk_live_SeCrEt42\r\n', ' sk_live_SeCrEt42', 'sk_live_SeCrEt42\u0415', 'sk_live_Se Crt42', ''];
    for (const key of keys) {
      const failure = refusal({ secretKey: key });
      expect(failure).toBeInstanceOf(TypeError);
      expect(failure.message).toMatch(/^auth\.secretKey: /);
      expect(failure.message).not.toMatch(/SeCrEt|Se Crt/);
    }
    for (const key of keys) expect(refusal({ publicId: key.replace('sk_', 'pk_'), signingSecret: secret }).message).toMatch(/^auth\.publicId: /);
    // The signing secret too, read from a file or the environment as they are (a line break would sign every request wrongly).
    for (const key of keys) {
      const failure = refusal({ publicId: 'pk_live_Pub42', signingSecret: key.replace('sk_live_', 'whsec_') });
      expect(failure.message).toMatch(/^auth\.signingSecret: /);
      expect(failure.message).not.toMatch(/SeCrEt|Se Crt/);
    }
    // A key that holds is taken; nothing was sent for the ones refused.
    stub.script({ status: 200, body: BALANCE });
    await expect(client({ auth: { secretKey: 'sk_live_SeCrEt42' } }).getBalance()).resolves.toEqual(BALANCE);
    expect(stub.attempts).toHaveLength(1);
  });

  it('a client logged or inspected does not show its secret key or signing secret', () => {
    const bearer = client({ auth: { secretKey: 'sk_live_SeCrEt42' } });
    const signing = client({ auth: { publicId: 'pk_live_Pub42', signingSecret: 'whsec_SiGnInG42' } });
    for (const shown of [
      inspect(bearer, { depth: 10, showHidden: true }),
      JSON.stringify(bearer),
      inspect(signing, { depth: 10, showHidden: true }),
      JSON.stringify(signing),
    ]) {
      expect(shown).not.toContain('SeCrEt42');
      expect(shown).not.toContain('SiGnInG42');
    }
  });

  it('maxRetries that is not a whole number from 0 to 4 (NaN from an unset variable, 10, -1) is refused at construction', async () => {
    for (const maxRetries of [10, -1, 5, 1.5, Infinity, Number(undefined)]) {
      expect(() => client({ maxRetries })).toThrow(new TypeError(`maxRetries: a whole number from 0 to 4, got ${String(maxRetries)}`));
    }
    stub.script(error(503, 'provider_unavailable'), error(503, 'provider_unavailable'));
    await expect(client({ maxRetries: 1 }).getBalance()).rejects.toMatchObject({ status: 503, attempts: 2 });
    expect(waits).toEqual([250]);
  });

  it('a timeoutMs that is not a whole number of milliseconds from 1 to 2^31 - 1 is refused at construction, not sent as "no answer"', async () => {
    for (const timeoutMs of [Infinity, NaN, 1.5, -1, 0, 2 ** 32, 2 ** 31, Number('30s')]) {
      expect(() => client({ timeoutMs })).toThrow(new TypeError(`timeoutMs: a whole number of milliseconds from 1 to 2147483647, got ${String(timeoutMs)}`));
    }
    stub.script({ status: 200, body: BALANCE }, { status: 200, body: BALANCE });
    await expect(client({ timeoutMs: 2 ** 31 - 1 }).getBalance()).resolves.toEqual(BALANCE);
    await expect(client({ timeoutMs: 1000 }).getBalance()).resolves.toEqual(BALANCE);
    expect(waits).toEqual([]);
  });

  it('a clockOffsetSeconds that is not a whole number of seconds (a string from the environment, NaN, a fraction) is refused at construction', async () => {
    const signing = (clockOffsetSeconds: unknown) =>
      client({ auth: { publicId: 'pk_test_stub', signingSecret: secret }, now: () => 1_800_000_000_000, clockOffsetSeconds: clockOffsetSeconds as number });
    for (const [offset, shown] of [
      ['10', '"10"'],
      [NaN, 'NaN'],
      [0.5, '0.5'],
      [Infinity, 'Infinity'],
      [1e300, '1e+300'],
      [null, 'null'],
    ] as const) {
      expect(() => signing(offset)).toThrow(new TypeError(`clockOffsetSeconds: a whole number of seconds (negative allowed), got ${shown}`));
    }
    stub.script({ status: 200, body: BALANCE });
    await expect(signing(-30).getBalance()).resolves.toEqual(BALANCE);
    expect(stub.attempts.map((a) => a.headers['x-timestamp'])).toEqual(['1799999970']);
  });

  it("the policy itself: no retry past 4, none of a POST that could act twice, 429 always, a proxy's 5xx page as no answer", () => {
    const network = { kind: 'network' } as const;
    expect(retryDelayMs(network, { retriesSoFar: 4, maxRetries: 4, repeatable: true })).toBeNull();
    expect(retryDelayMs(network, { retriesSoFar: 0, maxRetries: 4, repeatable: false })).toBeNull();
    expect(retryDelayMs({ kind: 'answer', status: 503 }, { retriesSoFar: 0, maxRetries: 4, repeatable: false })).toBeNull();
    expect(retryDelayMs({ kind: 'answer', status: 429, retryAfterSeconds: 3 }, { retriesSoFar: 0, maxRetries: 4, repeatable: false })).toBe(3000);
    expect(retryDelayMs({ kind: 'answer', status: 502 }, { retriesSoFar: 0, maxRetries: 4, repeatable: true })).toBe(250);
    expect(retryDelayMs({ kind: 'answer', status: 502 }, { retriesSoFar: 0, maxRetries: 4, repeatable: false })).toBeNull();
    expect(retryDelayMs({ kind: 'answer', status: 520, code: 'unexpected_response' }, { retriesSoFar: 1, maxRetries: 4, repeatable: true })).toBe(500);
    expect(retryDelayMs({ kind: 'answer', status: 501, code: 'internal' }, { retriesSoFar: 0, maxRetries: 4, repeatable: true })).toBeNull();
    // docs/sdk.md's table: a 502's or 504's Retry-After counts as a 503's (longer waited, over 60 s thrown); a 500's or another 5xx page's is not read.
    const asking = (status: number, retryAfterSeconds: number, code?: string) =>
      retryDelayMs({ kind: 'answer', status, retryAfterSeconds, ...(code ? { code } : {}) }, { retriesSoFar: 0, maxRetries: 4, repeatable: true });
    expect([asking(502, 5), asking(504, 5), asking(504, 120), asking(500, 5, 'internal'), asking(520, 5, 'unexpected_response')]).toEqual([
      5000,
      5000,
      null,
      250,
      250,
    ]);
  });
});
