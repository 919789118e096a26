/**
 * The operator API's OpenAPI 3.1.0 document: served at GET /admin/v1/openapi.json behind
 * the operator token, every schema compiles with Ajv 2020 (strict), request bodies are
 * the operator DTOs' generated schemas, and real operator answers match the response
 * schema the document declares for them.
 */
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { OPERATOR_OPENAPI_DOCUMENT } from '../../apps/api/src/docs/operator-document';
import { api, expectStatus, InvoiceGateway, Json, orderId, startInvoiceGateway } from '../support/merchant-fixtures';

const doc = OPERATOR_OPENAPI_DOCUMENT;
const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, allowUnionTypes: true });
addFormats(ajv);
ajv.addSchema({ $id: 'operator', $defs: JSON.parse(JSON.stringify(doc.components.schemas).replace(/#\/components\/schemas\//g, 'operator#/$defs/')) });
const validator = (name: string) => ajv.compile({ $ref: `operator#/$defs/${name}` });
const responseSchema = (path: string, method: 'get' | 'post' | 'patch', status: string) => {
  const schema = doc.paths[path]![method]!.responses[status]!.content!['application/json'].schema;
  return ajv.compile(JSON.parse(JSON.stringify(schema).replace(/#\/components\/schemas\//g, 'operator#/$defs/')));
};

describe('the operator OpenAPI document', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    // CLOCK=manual: POST /admin/v1/clock/advance, one of the documented routes, answers only on it.
    gw = await startInvoiceGateway({ CLOCK: 'manual' });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('is served at GET /admin/v1/openapi.json with the operator token, and is 401 unauthorized without it', async () => {
    const without = await api(gw.baseUrl).get('/admin/v1/openapi.json');
    expect({ status: without.status, code: without.body?.error?.code }).toEqual({ status: 401, code: 'unauthorized' });
    const merchantKey = await api(gw.baseUrl, 'sk_test_not-an-operator').get('/admin/v1/openapi.json');
    expect(merchantKey.status).toBe(401);
    const served = await gw.operator.http.get('/admin/v1/openapi.json');
    expectStatus(served, 200);
    expect(served.body).toEqual(JSON.parse(JSON.stringify(doc)));
    expect(served.body.openapi).toBe('3.1.0');
  });

  it('every component schema and every operation schema compiles (Ajv 2020, strict)', () => {
    for (const name of Object.keys(doc.components.schemas)) expect(() => validator(name)).not.toThrow();
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of ['get', 'post', 'patch'] as const) {
        const op = item[method];
        if (!op) continue;
        for (const status of Object.keys(op.responses)) if (op.responses[status]!.content) expect(() => responseSchema(path, method, status)).not.toThrow();
      }
    }
  });

  it('documents every operator route the gateway serves', () => {
    const routes = [
      'post /accounts',
      'post /projects',
      'get /projects/{id}',
      'patch /projects/{id}',
      'post /projects/{id}/keys/rotate',
      'post /projects/{id}/webhook-secret/rotate',
      'post /accounts/{id}/payout-addresses',
      'post /payout-addresses/{id}/confirm',
      'post /payouts/{id}/approve',
      'post /payouts/{id}/process',
      'post /payouts/{id}/pay',
      'post /payouts/{id}/reject',
      'post /payouts/{id}/cancel',
      'post /refunds/{id}/fail',
      'post /invoices/{id}/payment',
      'get /accounts/{id}/ledger',
      'get /accounts/{id}/balance',
      'get /accounts/{id}/statement',
      'get /accounts/{id}/signed-statement',
      'get /audit/trial-balance',
      'get /audit/reconciliation',
      'get /audit/checkpoint',
      'get /streams/{streamName}',
      'get /webhook-deliveries',
      'post /webhook-deliveries/{id}/resend',
      'post /projects/{id}/webhook-deliveries/resend-failed',
      'post /projects/{id}/webhook-endpoint/enable',
      'post /clock/advance',
      'get /openapi.json',
    ];
    const documented = Object.entries(doc.paths).flatMap(([path, item]) =>
      (['get', 'post', 'patch'] as const).filter((m) => item[m]).map((m) => `${m} ${path}`),
    );
    expect(documented.sort()).toEqual(routes.sort());
  });

  it('request bodies are the DTOs’ schemas: what the validator refuses, the document refuses', async () => {
    const createProject = validator('CreateProjectRequest');
    const body = { accountId: '00000000-0000-4000-8000-000000000000', name: 'Магазин', methods: { sbp: { feePct: '2.5', min: '10.00' } } };
    expect(createProject(body)).toBe(true);
    expect(createProject({ ...body, bogus: 1 })).toBe(false);
    expect(createProject({ ...body, holdHours: 721 })).toBe(false);
    expect(createProject({ ...body, methods: { sbp: { feePct: 'x' } } })).toBe(false);
    expect(validator('UpdateProjectRequest')({ accountId: body.accountId })).toBe(false);
    expect(validator('AdvanceClockRequest')({})).toBe(false);
    expect(validator('PayoutReasonRequest')({ reason: '' })).toBe(false);
    // And the gateway refuses the same bodies.
    for (const refused of [
      { ...body, bogus: 1 },
      { ...body, holdHours: 721 },
      { ...body, methods: { sbp: { feePct: 'x' } } },
    ]) {
      expect((await gw.operator.http.post('/admin/v1/projects', refused)).status).toBe(400);
    }
  });

  it('real operator answers match the documented response schemas', async () => {
    const account = await gw.operator.http.post('/admin/v1/accounts', { name: 'ООО Схема', email: `schema-${orderId()}@example.com` });
    expectStatus(account, 201);
    const check = (path: string, method: 'get' | 'post' | 'patch', status: string, value: Json) => {
      const validate = responseSchema(path, method, status);
      expect({ path, ok: validate(value), errors: validate.errors }).toEqual({ path, ok: true, errors: null });
    };
    check('/accounts', 'post', '201', account.body);
    const project = await gw.operator.http.post('/admin/v1/projects', { accountId: account.body.id, name: 'Схема' });
    expectStatus(project, 201);
    check('/projects', 'post', '201', project.body);
    const got = await gw.operator.http.get(`/admin/v1/projects/${project.body.id}`);
    check('/projects/{id}', 'get', '200', got.body);
    const rotated = await gw.operator.http.post(`/admin/v1/projects/${project.body.id}/webhook-secret/rotate`);
    check('/projects/{id}/webhook-secret/rotate', 'post', '201', rotated.body);
    const address = await gw.operator.http.post(`/admin/v1/accounts/${account.body.id}/payout-addresses`, { method: 'sbp', account: '+79161234567' });
    check('/accounts/{id}/payout-addresses', 'post', '201', address.body);
    const advanced = await gw.operator.http.post('/admin/v1/clock/advance', { seconds: 0 });
    check('/clock/advance', 'post', '200', advanced.body);
    const checkpoint = await gw.operator.http.get('/admin/v1/audit/checkpoint');
    expectStatus(checkpoint, 200);
    check('/audit/checkpoint', 'get', '200', checkpoint.body);
    const refused = await gw.operator.http.post('/admin/v1/accounts', { name: '' });
    check('/accounts', 'post', '400', refused.body);
  });

  it('documents every status an operator route answers: 400, 408, 500 and 503 on every route, 413 and 415 where a body is read, the payment result’s 409 and 422', async () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item as Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>)) {
        const statuses = Object.keys(op.responses);
        expect({ path, method, failures: ['400', '408', '500', '503'].every((s) => statuses.includes(s)) }).toEqual({ path, method, failures: true });
        if (op.requestBody) expect({ path, method, bodyErrors: ['413', '415'].every((s) => statuses.includes(s)) }).toEqual({ path, method, bodyErrors: true });
      }
    }
    const http = (path: string, init: RequestInit) =>
      fetch(`${gw.baseUrl}${path}`, { ...init, headers: { authorization: `Bearer ${gw.gateway.adminToken}`, ...init.headers } });
    const answered = async (path: string, init: RequestInit) => {
      const r = await http(path, init);
      return { status: String(r.status), body: await r.json() };
    };
    const check = (path: string, method: 'get' | 'post', { status, body }: { status: string; body: Json }) => {
      const validate = responseSchema(path, method, status);
      expect({ path, status, ok: validate(body) }).toEqual({ path, status, ok: true });
    };
    const shop = await gw.operator.merchant({ holdHours: 0 });
    const invoice = await shop.test.post('/v1/invoices', { amount: '100.00', orderId: orderId(), method: 'sbp' });
    expectStatus(await gw.operator.payment(invoice.body.id, 'paid'), 200);
    const json = { 'content-type': 'application/json' };
    check(
      '/invoices/{id}/payment',
      'post',
      await answered(`/admin/v1/invoices/${invoice.body.id}/payment`, { method: 'POST', headers: json, body: '{"outcome":"paid"}' }),
    );
    const open = await shop.test.post('/v1/invoices', { amount: '100.00', orderId: orderId() });
    const crypto = await answered(`/admin/v1/invoices/${open.body.id}/payment`, {
      method: 'POST',
      headers: json,
      body: '{"outcome":"paid","method":"crypto"}',
    });
    expect(crypto.status).toBe('422');
    check('/invoices/{id}/payment', 'post', crypto);
    check('/projects/{id}', 'get', await answered(`/admin/v1/projects/${shop.projectId}?x=1`, { method: 'GET' }));
    check('/accounts', 'post', await answered('/admin/v1/accounts', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'name' }));
    const large = await answered('/admin/v1/accounts', { method: 'POST', headers: json, body: JSON.stringify({ name: 'x'.repeat(70_000) }) });
    expect(large.status).toBe('413');
    check('/accounts', 'post', large);
  });
});
