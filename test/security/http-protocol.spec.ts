/**
 * The HTTP surface below the routes, as real clients, proxies and scanners send it, in
 * raw bytes: a request line in absolute form, pipelined requests before bad bytes, a
 * body that never arrives, long ids. Every answer is the spec's error shape with a
 * status that says what happened, and a request is never answered as refused after it
 * was carried out.
 */
import { connect, Socket } from 'node:net';
import { Client } from 'pg';
import { api, expectStatus, InvoiceGateway, Json, logLinesWith, Merchant, orderId, poll, sleep, startInvoiceGateway } from '../support/merchant-fixtures';
import { sendSigned, signRequest } from '../support/signing';
import { instantMerchant, paidInvoice } from '../support/money-out-fixtures';

/** Writes `bytes` on a new connection (in parts, `pauseMs` apart) and collects what comes back until the server closes it or `untilMs` passes. */
async function exchange(
  port: number,
  parts: readonly string[],
  options: { untilMs?: number; pauseMs?: number } = {},
): Promise<{ text: string; closed: boolean }> {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  socket.on('data', (chunk) => (text += chunk.toString('utf8')));
  const closed = new Promise<boolean>((resolve) => socket.once('close', () => resolve(true)));
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  for (const part of parts) {
    socket.write(part);
    if (options.pauseMs) await new Promise((r) => setTimeout(r, options.pauseMs));
  }
  const ended = await Promise.race([closed, new Promise<boolean>((r) => setTimeout(() => r(false), options.untilMs ?? 5_000))]);
  socket.destroy();
  return { text, closed: ended };
}

/** A new connection, once connected, collecting what comes back; `closed` resolves when it closes. */
async function opened(port: number): Promise<{ socket: Socket; text: () => string; closed: Promise<void> }> {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  socket.on('data', (chunk) => (text += chunk.toString('utf8')));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return { socket, text: () => text, closed };
}

/** The status lines of the answers in `text`, in order. */
const statusesOf = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) [A-Z]/g)].map((m) => Number(m[1]));

describe('the HTTP surface in raw bytes', () => {
  let gw: InvoiceGateway;
  let shop: Merchant;
  let port: number;

  beforeAll(async () => {
    gw = await startInvoiceGateway();
    shop = await gw.operator.merchant();
    port = Number(new URL(gw.baseUrl).port);
  });
  afterAll(async () => {
    await gw?.close();
  });

  const request = (line: string, headers: Record<string, string>, body = '') =>
    `${line}\r\n${Object.entries({ host: 'gateway.test', ...headers, ...(body ? { 'content-length': String(Buffer.byteLength(body)) } : {}) })
      .map(([k, v]) => `${k}: ${v}`)
      .join('\r\n')}\r\n\r\n${body}`;
  const auth = () => ({ authorization: `Bearer ${shop.keys.test.secretKey}` });
  /** The invoices created with this orderId, from the event log itself (the list is a read model, milliseconds behind). */
  const invoicesWith = async (id: string) =>
    (await gw.db.pool.query(`SELECT 1 FROM events WHERE event_type = 'InvoiceCreated' AND data->>'orderId' = $1`, [id])).rows;

  it('a request line in absolute form is read as its path: the JSON-only rule, the query rules and the idempotency key hold', async () => {
    const form = orderId('absolute-form');
    const refused = await exchange(port, [
      request(
        `POST http://gateway.test/v1/invoices HTTP/1.1`,
        { ...auth(), 'content-type': 'application/x-www-form-urlencoded', connection: 'close' },
        `amount=100.00&orderId=${form}`,
      ),
    ]);
    expect(statusesOf(refused.text)).toEqual([415]);
    expect(refused.text).toContain('"code":"unsupported_media_type"');
    expect(await invoicesWith(form)).toEqual([]);

    const account = await exchange(port, [
      request(
        `POST http://gateway.test/admin/v1/accounts HTTP/1.1`,
        { authorization: `Bearer ${gw.gateway.adminToken}`, 'content-type': 'application/x-www-form-urlencoded', connection: 'close' },
        'name=Form&email=f%40example.com',
      ),
    ]);
    expect(statusesOf(account.text)).toEqual([415]);

    const escape = await exchange(port, [request(`GET http://gateway.test/v1/invoices?orderId=%E9 HTTP/1.1`, { ...auth(), connection: 'close' })]);
    expect(statusesOf(escape.text)).toEqual([400]);
    expect(escape.text).toContain('"param":"orderId"');

    // The same keyed request in origin form, then in absolute form: one request, replayed (not a conflict).
    const key = `abs-${orderId('key')}`;
    const body = JSON.stringify({ amount: '100.00', orderId: orderId('absolute-keyed') });
    const first = await shop.test.raw('POST', '/v1/invoices', { body, headers: { ...auth(), 'content-type': 'application/json', 'idempotency-key': key } });
    expectStatus(first, 201);
    const again = await exchange(port, [
      request(
        `POST http://gateway.test/v1/invoices HTTP/1.1`,
        { ...auth(), 'content-type': 'application/json', 'idempotency-key': key, connection: 'close' },
        body,
      ),
    ]);
    expect(statusesOf(again.text)).toEqual([201]);
    expect(again.text).toMatch(/idempotent-replayed: true/i);
  });

  it('a path with percent-escapes is judged as the route that takes it: the JSON-only rule, the query rules and the API error shape hold', async () => {
    // The router decodes the path: `/%761/...` and `/v%31/...` are the /v1 routes.
    const merchant = await instantMerchant(gw.operator);
    const key = `Bearer ${merchant.keys.test.secretKey}`;
    const paid = await paidInvoice(gw.operator, merchant.test, '100.00');
    const refunds = async () =>
      (await gw.db.pool.query(`SELECT 1 FROM events WHERE event_type = 'InvoiceRefundRequested' AND data->>'invoiceId' = $1`, [paid])).rows.length;
    // An empty form (`curl -d "$AMOUNT"` with the variable empty): read as no body, the refund would be a full one.
    const form = await exchange(port, [
      request(`POST /%761/invoices/${paid}/refund HTTP/1.1`, {
        authorization: key,
        'content-type': 'application/x-www-form-urlencoded',
        'content-length': '0',
        connection: 'close',
      }),
    ]);
    expect({ status: statusesOf(form.text)[0], code: /"code":"(\w+)"/.exec(form.text)?.[1], refunds: await refunds() }).toEqual({
      status: 415,
      code: 'unsupported_media_type',
      refunds: 0,
    });

    const escape = await exchange(port, [request(`GET /v%31/invoices?orderId=%E9 HTTP/1.1`, { authorization: key, connection: 'close' })]);
    expect({ status: statusesOf(escape.text)[0], param: /"param":"(\w+)"/.exec(escape.text)?.[1] }).toEqual({ status: 400, param: 'orderId' });

    const id = orderId('escaped-two-types');
    const body = JSON.stringify({ amount: '100.00', orderId: id });
    const twoTypes = await exchange(port, [
      `POST /%761/invoices HTTP/1.1\r\nhost: gateway.test\r\nauthorization: ${key}\r\ncontent-type: application/json\r\ncontent-type: text/plain\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    ]);
    expect({ status: statusesOf(twoTypes.text)[0], written: (await invoicesWith(id)).length }).toEqual({ status: 415, written: 0 });

    // The operator API, not the console, even for a browser: its answers are the spec's JSON.
    const operator = await exchange(port, [request(`GET /admin/v%31/accounts/x/balance HTTP/1.1`, { accept: 'text/html', connection: 'close' })]);
    expect({ status: statusesOf(operator.text)[0], json: /\r\ncontent-type: application\/json/i.test(operator.text) }).toEqual({ status: 401, json: true });
  });

  it('requests pipelined before bytes that are not HTTP are answered first, in order; then the 400', async () => {
    const pipelined = orderId('pipelined');
    // A quick read first, then the write, then another read: every one of them is owed an answer.
    const answered = await exchange(port, [
      request('GET /v1/methods HTTP/1.1', auth()) +
        request('POST /v1/invoices HTTP/1.1', { ...auth(), 'content-type': 'application/json' }, JSON.stringify({ amount: '150.00', orderId: pipelined })) +
        request('GET /health/live HTTP/1.1', {}) +
        'GARBAGE\r\n\r\n',
    ]);
    expect(statusesOf(answered.text)).toEqual([200, 201, 200, 400]);
    expect(answered.text).toContain('"param":"request"');
    expect(await invoicesWith(pipelined)).toHaveLength(1);
  });

  it('a body or headers that stop arriving are answered 408 in the error shape within the 60 s the docs give, and nothing is written', async () => {
    const stalled = orderId('stalled');
    const body = JSON.stringify({ amount: '100.00', orderId: stalled });
    const timed = async (parts: string[]) => {
      const started = Date.now();
      const answer = await exchange(port, parts, { untilMs: 100_000 });
      return { ...answer, seconds: (Date.now() - started) / 1000 };
    };
    const stalledBody = timed([
      `POST /v1/invoices HTTP/1.1\r\nhost: gateway.test\r\nauthorization: Bearer ${shop.keys.test.secretKey}\r\ncontent-type: application/json\r\ncontent-length: ${body.length + 10}\r\nx-request-id: stalled-body-${stalled}\r\n\r\n${body}`,
    ]);
    // A client that keeps its side open after the 408 (never closes): the gateway closes the connection all the same.
    const lingering = (async () => {
      const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      socket.on('error', () => undefined);
      // Read (and drop) the answer: 'end' comes only once what was sent before the FIN is read.
      socket.resume();
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      socket.write(
        `POST /v1/invoices HTTP/1.1\r\nhost: gateway.test\r\nauthorization: Bearer ${shop.keys.test.secretKey}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"amount"`,
      );
      const ended = await Promise.race([new Promise<boolean>((resolve) => socket.once('end', () => resolve(true))), sleep(80_000).then(() => false)]);
      if (!ended) return 'no 408 came';
      // Past the gateway's linger: a byte sent now meets a closed socket (a reset), not one still open.
      await sleep(7_000);
      // The first byte draws the reset; the second meets it (this side reads no more after the FIN).
      socket.write('x');
      await sleep(1_000);
      socket.write('y');
      return Promise.race([closed.then(() => 'closed by the gateway'), sleep(5_000).then(() => 'still open')]).finally(() => socket.destroy());
    })();
    // 15 s apart: were the timeouts looked for every 30 s (Node's default), one of the two would wait 75 s or more.
    await sleep(15_000);
    const stalledHeaders = timed([`GET /v1/balance HTTP/1.1\r\nhost: gateway.test\r\n`]);
    for (const answer of [await stalledBody, await stalledHeaders]) {
      expect(answer.closed).toBe(true);
      expect(statusesOf(answer.text)).toEqual([408]);
      expect(answer.text).toContain('"code":"request_timeout"');
      // A bound on behaviour, not a measurement: the docs promise the 408 after 60 s; 70 leaves room for a loaded machine.
      expect(answer.seconds).toBeLessThan(70);
    }
    expect(await invoicesWith(stalled)).toEqual([]);
    expect(await lingering).toBe('closed by the gateway');
    // The request cut off by the 408 is in the log once, with that 408.
    expect(linesOf(`stalled-body-${stalled}`)).toEqual([expect.objectContaining({ level: 30, msg: 'request', status: 408 })]);
  }, 120_000);

  /** The gateway's log lines of this request. */
  const linesOf = (requestId: string): Json[] => logLinesWith(gw.gateway, requestId);
  /** http_requests_total for POST /v1/invoices with this status. */
  const createsCounted = async (status: number): Promise<number> => {
    const text = (await fetch(`${gw.baseUrl}/metrics`, { headers: { authorization: `Bearer ${gw.gateway.adminToken}` } }).then((r) => r.text())) as string;
    const line = text
      .split('\n')
      .find(
        (l) => l.startsWith('http_requests_total{') && l.includes('method="POST"') && l.includes('route="/v1/invoices"') && l.includes(`status="${status}"`),
      );
    return line === undefined ? 0 : Number(line.split(' ').at(-1));
  };
  const create = (id: string, requestId: string) => {
    const body = JSON.stringify({ amount: '100.00', orderId: id });
    return request('POST /v1/invoices HTTP/1.1', { ...auth(), 'content-type': 'application/json', 'x-request-id': requestId }, body);
  };

  it('a client that half-closes after its request (nc -N) gets its answer; the request is logged and counted', async () => {
    const id = orderId('half-closed');
    const before = await createsCounted(201);
    const client = await opened(port);
    client.socket.end(create(id, `half-closed-${id}`));
    await client.closed;
    expect(statusesOf(client.text())).toEqual([201]);
    expect(await invoicesWith(id)).toHaveLength(1);
    // The request line is written after the answer: it may come a moment after the client has it.
    await poll(
      async () => linesOf(`half-closed-${id}`),
      (found) => found.length > 0,
      'the request line',
    );
    expect(linesOf(`half-closed-${id}`)).toEqual([expect.objectContaining({ level: 30, msg: 'request', route: '/v1/invoices', status: 201 })]);
    expect(linesOf(`half-closed-${id}`)[0].clientGone).toBeUndefined();
    expect(await createsCounted(201)).toBe(before + 1);
  });

  it('a client that resets its connection while its POST runs: the invoice it created is in the log once, with its 201, and counted', async () => {
    const id = orderId('reset');
    const before = await createsCounted(201);
    // The test holds the event log's table, so the request waits in its handler until the client is gone.
    const holder = new Client({ connectionString: gw.db.url, application_name: 'events-lock-holder' });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE events IN EXCLUSIVE MODE');
      const client = await opened(port);
      client.socket.write(create(id, `reset-${id}`));
      await poll(
        async () => (await holder.query(`SELECT 1 FROM pg_locks WHERE relation = 'events'::regclass AND NOT granted`)).rowCount,
        (waiting) => (waiting ?? 0) > 0,
        'the request to wait for the events table',
      );
      client.socket.resetAndDestroy();
      await client.closed;
      // The gateway reads the reset before its handler can go on.
      await sleep(500);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
    await poll(
      () => invoicesWith(id),
      (rows) => rows.length === 1,
      'the invoice to be created',
    );
    const [line] = await poll(
      async () => linesOf(`reset-${id}`),
      (lines) => lines.length > 0,
      'the request line',
    );
    expect(line).toMatchObject({ level: 30, msg: 'request', route: '/v1/invoices', status: 201, clientGone: true });
    expect(linesOf(`reset-${id}`)).toHaveLength(1);
    expect(await createsCounted(201)).toBe(before + 1);
  });

  it('a client that drops mid-body is one info line (a client gone, not a database outage), and nothing is written; to a path no route has too', async () => {
    for (const [drop, path, route] of [
      ['close', '/v1/invoices', '/v1/invoices'],
      ['reset', '/v1/invoices', '/v1/invoices'],
      // Not its 404: the body never came whole, which is what happened.
      ['close', '/v1/nope', 'unmatched'],
      ['reset', '/v1/nope', 'unmatched'],
    ] as const) {
      const id = orderId(`mid-body-${drop}`);
      const body = JSON.stringify({ amount: '100.00', orderId: id });
      const client = await opened(port);
      const head = { ...auth(), 'content-type': 'application/json', 'content-length': String(body.length), 'x-request-id': `mid-body-${id}` };
      client.socket.write(request(`POST ${path} HTTP/1.1`, head) + body.slice(0, 10));
      await sleep(300);
      if (drop === 'close') client.socket.destroy();
      else client.socket.resetAndDestroy();
      await client.closed;
      await poll(
        async () => linesOf(`mid-body-${id}`),
        (found) => found.length > 0,
        'the request line',
      );
      // One line, at info: not "request failed" at error level with a 503 for a database that was never asked.
      await sleep(200);
      expect(linesOf(`mid-body-${id}`)).toEqual([
        // A dropped connection is a client gone; a closed one was answered 400 on the connection, which is its status.
        expect.objectContaining({ level: 30, msg: 'request', route, status: 400, ...(drop === 'reset' ? { clientGone: true } : {}) }),
      ]);
      expect(await invoicesWith(id)).toEqual([]);
    }
  });

  it("what Node's server would answer itself is in the error shape: no Host, an Expect it cannot meet, CONNECT (405 with Allow)", async () => {
    const shapes = async (bytes: string) => {
      const { text } = await exchange(port, [bytes]);
      const body = text.slice(text.indexOf('\r\n\r\n') + 4);
      return {
        status: statusesOf(text)[0],
        noStore: /cache-control: no-store/i.test(text),
        allow: /\r\nallow: ([^\r]*)/i.exec(text)?.[1],
        error: (JSON.parse(body) as { error: { code: string; param?: string } }).error,
      };
    };
    expect(await shapes('GET /v1/balance HTTP/1.1\r\nconnection: close\r\n\r\n')).toMatchObject({
      status: 400,
      noStore: true,
      error: { code: 'validation', param: 'host' },
    });
    // Two of them (RFC 9112 §3.2): which one a proxy routed by is not known.
    expect(await shapes('GET /v1/balance HTTP/1.1\r\nhost: gateway.test\r\nHost: other.test\r\nconnection: close\r\n\r\n')).toMatchObject({
      status: 400,
      noStore: true,
      error: { code: 'validation', param: 'host' },
    });
    expect(
      await shapes(request('POST /v1/invoices HTTP/1.1', { ...auth(), 'content-type': 'application/json', expect: '200-ok', connection: 'close' }, '{}')),
    ).toMatchObject({
      status: 417,
      noStore: true,
      error: { code: 'validation', param: 'expect' },
    });
    // CONNECT names no resource of the gateway: Allow names the methods its routes take.
    expect(await shapes('CONNECT gateway.test:443 HTTP/1.1\r\nhost: gateway.test:443\r\n\r\n')).toMatchObject({
      status: 405,
      noStore: true,
      allow: 'GET, HEAD, PATCH, POST',
      error: { code: 'method_not_allowed' },
    });
  });

  it('a method a route does not take, at a path a route has, is 405 with Allow (never not_found, which says a payout does not exist); a path no route has is 404', async () => {
    const invoice = await shop.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('allow') });
    expectStatus(invoice, 201);
    const admin = { authorization: `Bearer ${gw.gateway.adminToken}` };
    const cases: [string, string, Record<string, string>, string | null][] = [
      ['DELETE', '/v1/payouts/1', auth(), 'GET, HEAD'],
      ['PUT', '/v1/invoices', auth(), 'GET, HEAD, POST'],
      ['PATCH', `/v1/invoices/${invoice.body.id}`, auth(), 'GET, HEAD'],
      ['PROPFIND', '/v1/balance', {}, 'GET, HEAD'],
      ['OPTIONS', '/v1/invoices', { origin: 'https://shop.example', 'access-control-request-method': 'POST' }, 'GET, HEAD, POST'],
      ['GET', '/admin/v1/clock/advance', admin, 'POST'],
      ['PUT', '/admin/v1/projects/x', admin, 'GET, HEAD, PATCH'],
      // The payment page in JSON, as it is as a page (payment-page.spec.ts).
      ['DELETE', `/pay/${invoice.body.id}`, { accept: 'application/json' }, 'GET, HEAD'],
      ['DELETE', '/v1/payouts/1/', auth(), null],
      ['DELETE', '/v1/payouts/', auth(), null],
      ['DELETE', '/V1/payouts/1', auth(), null],
      // A path that does not decode is no route's, whatever the router's bad-URL handler says.
      ['DELETE', '/nothing/%zz', auth(), null],
      ['PUT', '/v1/payouts/%E9', auth(), null],
    ];
    for (const [method, path, headers, allow] of cases) {
      const r = await shop.test.raw(method, path, { headers });
      expect({ method, path, status: r.status, code: r.body?.error?.code, allow: r.headers.get('allow') }).toEqual({
        method,
        path,
        status: allow === null ? 404 : 405,
        code: allow === null ? 'not_found' : 'method_not_allowed',
        allow,
      });
    }
    // `*` is no path: not the methods of `/`.
    const { text } = await exchange(port, ['OPTIONS * HTTP/1.1\r\nhost: gateway.test\r\nconnection: close\r\n\r\n']);
    expect({ status: statusesOf(text)[0], allow: /\r\nallow:/i.test(text) }).toEqual({ status: 404, allow: false });
    // What Allow names is taken.
    expectStatus(await shop.test.raw('GET', '/v1/payouts/1', { headers: auth() }), 404);
    expectStatus(await shop.test.raw('GET', '/admin/v1/projects/x', { headers: admin }), 404);
  });

  it('a request no route takes is its 404 or 405 whatever its body: not 415 for its type, not 400 for JSON that does not parse', async () => {
    const admin = { authorization: `Bearer ${gw.gateway.adminToken}` };
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const json = { 'content-type': 'application/json' };
    const cases: [string, string, Record<string, string>, string, string | null][] = [
      ['PUT', '/v1/invoices', { ...auth(), 'content-type': 'text/plain' }, 'x', 'GET, HEAD, POST'],
      ['PUT', '/v1/invoices', { ...auth(), ...json }, '{bad', 'GET, HEAD, POST'],
      ['PUT', '/v1/invoices', { ...auth(), ...json }, '{"a":1,"a":2}', 'GET, HEAD, POST'],
      ['DELETE', '/v1/methods', { ...auth(), 'content-type': 'text/plain' }, '', 'GET, HEAD'],
      ['POST', '/v1/methods', { ...auth(), ...json }, '{bad', 'GET, HEAD'],
      ['PUT', '/admin/v1/projects/x', { ...admin, ...form }, 'a=1', 'GET, HEAD, PATCH'],
      ['POST', '/v1/nope', { 'content-type': 'text/plain' }, 'x', null],
      ['POST', '/v2/invoices', { ...auth(), ...json }, '{bad', null],
      ['POST', '/v1/nope', { ...auth(), ...json }, '{bad', null],
      ['POST', '/v1/nope', { ...auth(), ...json, 'content-encoding': 'gzip' }, '{}', null],
    ];
    for (const [method, path, headers, body, allow] of cases) {
      const r = await shop.test.raw(method, path, { headers, body });
      expect({ method, path, body, status: r.status, code: r.body?.error?.code, allow: r.headers.get('allow') }).toEqual({
        method,
        path,
        body,
        status: allow === null ? 404 : 405,
        code: allow === null ? 'not_found' : 'method_not_allowed',
        allow,
      });
    }
    // A route that exists still judges the body.
    const text = await shop.test.raw('POST', '/v1/invoices', { headers: { ...auth(), 'content-type': 'text/plain' }, body: 'x' });
    expect({ status: text.status, code: text.body.error.code }).toEqual({ status: 415, code: 'unsupported_media_type' });
    const broken = await shop.test.raw('POST', '/v1/invoices', { headers: { ...auth(), ...json }, body: '{bad' });
    expect({ status: broken.status, code: broken.body.error.code, param: broken.body.error.param }).toEqual({ status: 400, code: 'validation', param: 'body' });
  });

  it('two Content-Type headers are 415 whichever comes first (no one media type), and nothing is written', async () => {
    const answer = async (types: string[]) => {
      const id = orderId('two-types');
      const body = JSON.stringify({ amount: '100.00', orderId: id });
      const headers = types.map((t) => `content-type: ${t}\r\n`).join('');
      const { text } = await exchange(port, [
        `POST /v1/invoices HTTP/1.1\r\nhost: gateway.test\r\nauthorization: Bearer ${shop.keys.test.secretKey}\r\n${headers}content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      ]);
      const error = (JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error?: { code: string; message: string } }).error;
      return {
        status: statusesOf(text)[0],
        code: error?.code,
        namesIt: error?.message.includes('Content-Type') ?? false,
        written: (await invoicesWith(id)).length,
      };
    };
    const refused = { status: 415, code: 'unsupported_media_type', namesIt: true, written: 0 };
    expect(await answer(['application/json', 'text/plain'])).toEqual(refused);
    expect(await answer(['text/plain', 'application/json'])).toEqual(refused);
    expect(await answer(['application/json', 'application/json'])).toEqual(refused);
    expect(await answer(['application/json'])).toEqual({ status: 201, code: undefined, namesIt: false, written: 1 });
  });

  it('two Authorization headers are refused (401), whichever holds the key; with WWW-Authenticate, on either API', async () => {
    const key = `Bearer ${shop.keys.test.secretKey}`;
    const admin = `Bearer ${gw.gateway.adminToken}`;
    const answer = async (path: string, values: string[]) => {
      const headers = values.map((v) => `authorization: ${v}\r\n`).join('');
      const { text } = await exchange(port, [`GET ${path} HTTP/1.1\r\nhost: gateway.test\r\n${headers}connection: close\r\n\r\n`]);
      const body = text.slice(text.indexOf('\r\n\r\n') + 4);
      return {
        status: statusesOf(text)[0],
        challenge: /\r\nwww-authenticate: ([^\r]*)/i.exec(text)?.[1],
        code: (JSON.parse(body) as { error?: { code: string } }).error?.code,
      };
    };
    const refused = (realm: string) => ({ status: 401, challenge: `Bearer realm="${realm}"`, code: 'unauthorized' });
    expect(await answer('/v1/balance', [key])).toEqual({ status: 200, challenge: undefined, code: undefined });
    expect(await answer('/v1/balance', [key, 'Bearer sk_test_other'])).toEqual(refused('gateway'));
    expect(await answer('/v1/balance', ['Bearer sk_test_other', key])).toEqual(refused('gateway'));
    expect(await answer('/v1/balance', [key, key])).toEqual(refused('gateway'));
    expect(await answer('/admin/v1/accounts/x/balance', [admin, admin])).toEqual(refused('operator'));
    expect(await answer('/health/ready', [admin, admin])).toEqual(refused('operator'));
  });

  it('a repeated X-Public-Id, X-Timestamp or signature header is refused as a repeated Authorization (401 naming it, a failure), even with equal values; a Signature beside X-Signature is not ours', async () => {
    const secret = shop.project.webhookSecret as string;
    const publicId = shop.keys.test.publicKey;
    // Two minutes back: no other test here signs this body in that second (a signature is accepted once).
    const timestamp = String(Math.floor(Date.now() / 1000) - 120);
    const signature = signRequest(secret, timestamp);
    const failures = async () => {
      const text = await (await fetch(`${gw.baseUrl}/metrics`, { headers: { authorization: `Bearer ${gw.gateway.adminToken}` } })).text();
      return Number(/^auth_failures_total\{kind="signature"\} (\d+)$/m.exec(text)?.[1] ?? 0);
    };
    const answer = async (lines: [string, string][]) => {
      const headers = lines.map(([name, value]) => `${name}: ${value}\r\n`).join('');
      const { text } = await exchange(port, [`GET /v1/balance HTTP/1.1\r\nhost: gateway.test\r\n${headers}connection: close\r\n\r\n`]);
      const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error?: { code: string; param?: string; message: string } };
      return { status: statusesOf(text)[0], challenge: /\r\nwww-authenticate: ([^\r]*)/i.exec(text)?.[1], code: body.error?.code, param: body.error?.param };
    };
    const id: [string, string] = ['x-public-id', publicId];
    const ts: [string, string] = ['x-timestamp', timestamp];
    const sig: [string, string] = ['x-signature', signature];
    const cases: [[string, string][], string][] = [
      [[id, ['X-Public-Id', publicId], ts, sig], 'X-Public-Id'],
      [[id, ts, ts, sig], 'X-Timestamp'],
      [[id, ts, sig, sig], 'X-Signature'],
      [[id, ts, ['signature', signature], ['Signature', signature]], 'Signature'],
    ];
    // An RFC 9421 Signature a proxy added beside X-Signature, once or twice, is not ours: X-Signature is read (own seconds: each is spent).
    const rfc9421: [string, string][] = [
      ['signature-input', 'sig1=("@method");created=1700000000'],
      ['signature', 'sig1=:bm90IG91cnM=:'],
    ];
    const signedAt = (seconds: number): [string, string][] => [id, ['x-timestamp', String(seconds)], ['x-signature', signRequest(secret, String(seconds))]];
    const accepted = { status: 200, challenge: undefined, code: undefined, param: undefined };
    expect(await answer([...signedAt(Number(timestamp) - 1), ...rfc9421])).toEqual(accepted);
    expect(await answer([...signedAt(Number(timestamp) - 2), ...rfc9421, rfc9421[1]!])).toEqual(accepted);
    const before = await failures();
    for (const [lines, param] of cases) {
      expect({ param, reply: await answer(lines) }).toEqual({
        param,
        reply: { status: 401, challenge: 'Bearer realm="gateway"', code: 'unauthorized', param },
      });
    }
    expect(await failures()).toBe(before + cases.length);
    // An empty Authorization then a Bearer one beside a valid signature: a repeated Authorization (401), not the signature's request.
    const bearer: [string, string] = ['authorization', `Bearer ${shop.keys.test.secretKey}`];
    expect(await answer([['authorization', ''], bearer, ...signedAt(Number(timestamp) - 3)])).toMatchObject({ status: 401, code: 'unauthorized' });
    // An empty X-Public-Id beside a Bearer key is none: the Bearer request stands.
    expect(await answer([bearer, ['x-public-id', '']])).toEqual(accepted);
    // None of them spent the signature: sent once each, it holds.
    expect(await answer([id, ts, sig])).toEqual(accepted);
  });

  it('every 401 carries WWW-Authenticate: Bearer with the realm of its API; the body is the spec error as before', async () => {
    const anonymous = api(gw.baseUrl);
    const secret = shop.project.webhookSecret as string;
    const now = Math.floor(Date.now() / 1000);
    const first = await sendSigned(gw.baseUrl, { method: 'GET', path: '/v1/balance', publicId: shop.keys.test.publicKey, secret, timestamp: now - 1 });
    expectStatus(first, 200);
    const replies: [string, Awaited<ReturnType<typeof anonymous.get>>, string, string][] = [
      ['no credential', await anonymous.get('/v1/balance'), 'unauthorized', 'gateway'],
      ['unknown key', await api(gw.baseUrl, `sk_test_${'x'.repeat(32)}`).get('/v1/balance'), 'unauthorized', 'gateway'],
      [
        'unknown public id',
        await sendSigned(gw.baseUrl, { method: 'GET', path: '/v1/balance', publicId: 'pk_test_nobody', secret }),
        'unauthorized',
        'gateway',
      ],
      [
        'bad timestamp',
        await sendSigned(gw.baseUrl, { method: 'GET', path: '/v1/balance', publicId: shop.keys.test.publicKey, secret, timestamp: 'x' }),
        'timestamp_invalid',
        'gateway',
      ],
      [
        'bad signature',
        await sendSigned(gw.baseUrl, { method: 'GET', path: '/v1/balance', publicId: shop.keys.test.publicKey, secret, signature: 'ab'.repeat(32) }),
        'signature_invalid',
        'gateway',
      ],
      [
        'replayed signature',
        await sendSigned(gw.baseUrl, { method: 'GET', path: '/v1/balance', publicId: shop.keys.test.publicKey, secret, timestamp: now - 1 }),
        'signature_invalid',
        'gateway',
      ],
      ['operator API', await anonymous.get('/admin/v1/openapi.json'), 'unauthorized', 'operator'],
      ['metrics', await anonymous.raw('GET', '/metrics', { headers: { authorization: 'Bearer wrong' } }), 'unauthorized', 'operator'],
      ['readiness', await anonymous.raw('GET', '/health/ready', { headers: { authorization: 'Bearer wrong' } }), 'unauthorized', 'operator'],
    ];
    for (const [what, reply, code, realm] of replies) {
      expect({
        what,
        status: reply.status,
        challenge: reply.headers.get('www-authenticate'),
        keys: Object.keys(reply.body),
        code: reply.body.error.code,
      }).toEqual({
        what,
        status: 401,
        challenge: `Bearer realm="${realm}"`,
        keys: ['error'],
        code,
      });
    }
    expect(replies[3]![1].headers.get('x-server-time')).toMatch(/^\d+$/);
  });

  it('an id longer than 1,024 characters is that resource 404 (or 401 without a key), as a shorter one', async () => {
    const id = 'a'.repeat(4_000);
    const invoice = await shop.test.get(`/v1/invoices/${id}`);
    expect({ status: invoice.status, code: invoice.body.error.code }).toEqual({ status: 404, code: 'invoice_not_found' });
    const payout = await shop.live.get(`/v1/payouts/${id}`);
    expect({ status: payout.status, code: payout.body.error.code }).toEqual({ status: 404, code: 'not_found' });
  });
});
