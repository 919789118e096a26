/**
 * Headers and readiness (issue 12, item 5): every answer of the API (merchant,
 * operator, docs, OpenAPI, metrics, health, errors of every layer) carries
 * `Cache-Control: no-store`; the public GET /health/ready says the status only,
 * the detail (database, projections with their errors) needs the operator token or
 * the METRICS_PORT listener.
 */
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { api, Client, expectError, InvoiceGateway, Merchant, orderId, poll, Reply, startInvoiceGateway, ADMIN_TOKEN } from '../support/merchant-fixtures';

/** One raw HTTP exchange on a socket (what no HTTP client sends: a malformed request line). */
function rawExchange(baseUrl: string, bytes: string): Promise<string> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => socket.end(bytes));
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString('utf8')));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

describe('Cache-Control: no-store on every API answer, and a public readiness that says the status only', () => {
  let gw: InvoiceGateway;
  let merchant: Merchant;
  let anonymous: Client;
  let metricsPortUrl: string;

  beforeAll(async () => {
    gw = await startInvoiceGateway({ METRICS_PORT: '0' });
    merchant = await gw.operator.merchant({ name: 'Кэш' });
    anonymous = api(gw.baseUrl);
    const [, url] = await gw.gateway.waitForOutput(/metrics and health \(METRICS_PORT, no token\): (http:\/\/127\.0\.0\.1:\d+)\/metrics/);
    metricsPortUrl = url!;
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('every kind of answer: success, errors of the guards, the validation, the router and the body parser, operator, docs, OpenAPI, metrics, health', async () => {
    const invoice = await merchant.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('cache') });
    const replies: [string, Reply, number][] = [
      ['merchant success', await merchant.test.get('/v1/methods'), 200],
      ['merchant create', invoice, 201],
      ['merchant balance', await merchant.test.get('/v1/balance'), 200],
      ['merchant 404', await merchant.test.get(`/v1/invoices/${randomUUID()}`), 404],
      ['merchant 401', await anonymous.get('/v1/balance'), 401],
      ['merchant 401 wrong key', await api(gw.baseUrl, `sk_test_${'x'.repeat(32)}`).get('/v1/balance'), 401],
      ['validation', await merchant.test.post('/v1/invoices', { amount: 'много', orderId: orderId() }), 400],
      [
        'malformed JSON',
        await merchant.test.raw('POST', '/v1/invoices', {
          body: '{"amount":',
          headers: { authorization: `Bearer ${merchant.keys.test.secretKey}`, 'content-type': 'application/json' },
        }),
        400,
      ],
      ['bad URL', await anonymous.get('/v1/invoices/%E0%A4%A'), 400],
      ['not JSON', await merchant.test.raw('POST', '/v1/invoices', { body: 'amount=1', headers: { 'content-type': 'text/plain' } }), 415],
      ['unknown route', await anonymous.get('/v1/nothing-here'), 404],
      ['operator success', await gw.operator.http.get(`/admin/v1/projects/${merchant.projectId}`), 200],
      ['operator 401', await anonymous.get(`/admin/v1/projects/${merchant.projectId}`), 401],
      ['operator 404', await gw.operator.http.get(`/admin/v1/projects/${randomUUID()}`), 404],
      ['docs', await anonymous.get('/docs'), 200],
      ['openapi', await anonymous.get('/v1/openapi.json'), 200],
      ['metrics', await api(gw.baseUrl, ADMIN_TOKEN).get('/metrics'), 200],
      ['metrics 401', await anonymous.get('/metrics'), 401],
      ['health live', await anonymous.get('/health/live'), 200],
      ['health ready', await anonymous.get('/health/ready'), 200],
      ['payment page', await anonymous.get(`/pay/${invoice.body.id}`), 200],
      ['metrics port', await api(metricsPortUrl).get('/metrics'), 200],
      ['metrics port ready', await api(metricsPortUrl).get('/health/ready'), 200],
      ['metrics port 404', await api(metricsPortUrl).get('/v1/methods'), 404],
    ];
    for (const [what, reply, status] of replies) {
      expect({ what, status: reply.status, cacheControl: reply.headers.get('cache-control') }).toEqual({ what, status, cacheControl: 'no-store' });
    }
    // Refused by Node's HTTP parser before any route, on either port: still not cacheable, in the error shape.
    const refusals: [string, string, number][] = [
      ['garbage', 'GARBAGE\r\n\r\n', 400],
      ['control character in a header', 'GET /metrics HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n', 400],
      ['two Content-Length', 'GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n', 400],
      ['headers too large', `GET /metrics HTTP/1.1\r\nHost: a\r\nX: ${'x'.repeat(20_000)}\r\n\r\n`, 431],
    ];
    for (const [port, base] of [
      ['API', gw.baseUrl],
      ['METRICS_PORT', metricsPortUrl],
    ]) {
      for (const [what, bytes, status] of refusals) {
        const answer = await rawExchange(base!, bytes);
        const [head = '', body = ''] = answer.split('\r\n\r\n');
        expect({
          port,
          what,
          status: head.split(' ')[1],
          noStore: /\r\nCache-Control: no-store(\r\n|$)/i.test(head),
          body: JSON.parse(body || 'null'),
        }).toEqual({
          port,
          what,
          status: String(status),
          noStore: true,
          body: { error: expect.objectContaining({ code: 'validation', param: 'request' }) },
        });
      }
    }
  });

  it('GET /health/ready: the status only without a token; the detail with the operator token and on the metrics port; a wrong token is 401', async () => {
    const open = await anonymous.get('/health/ready');
    expect(open.status).toBe(200);
    expect(open.body).toEqual({ status: 'ready' });

    const detail = await poll(
      () => api(gw.baseUrl, ADMIN_TOKEN).get('/health/ready'),
      (r) => r.status === 200 && Array.isArray(r.body.projections) && r.body.projections.length > 0,
      'the readiness detail',
    );
    expect(detail.body).toMatchObject({ status: 'ready', ready: true, database: 'ok' });
    for (const p of detail.body.projections) expect(Object.keys(p).sort()).toEqual(['checkpoint', 'lag', 'lastError', 'projection', 'state']);

    const monitoring = await api(metricsPortUrl).get('/health/ready');
    expect(monitoring.body).toMatchObject({ status: 'ready', ready: true, database: 'ok', projections: expect.any(Array) });

    expectError(await api(gw.baseUrl, 'not-the-operator-token-but-long-enough').get('/health/ready'), 401, 'unauthorized');
  });
});
