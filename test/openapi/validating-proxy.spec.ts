/**
 * A validating proxy built from the OpenAPI documents as a third party gets them
 * (GET /v1/openapi.json, GET /admin/v1/openapi.json with the operator token), in the
 * place of Prism's proxy (not installed): every schema compiled with Ajv 2020 when it
 * starts, then every request of a merchant's flow (create an invoice, get it, list,
 * pay it through the operator API, refund, get the refund) goes through it; each
 * request must match a documented operation with a valid body, and each real answer
 * a documented status with a valid body. Issue 37: Prism's proxy never finished
 * starting on the 32 chained StorableJson schemas; this one must start within 30 s.
 */
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Ajv2020 from 'ajv/dist/2020';
import type { ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { api, expectStatus, InvoiceGateway, Json, Operator, orderId, poll, startInvoiceGateway } from '../support/merchant-fixtures';

interface Operation {
  readonly method: string;
  readonly pattern: RegExp;
  readonly name: string;
  readonly body: ValidateFunction | null;
  readonly responses: Record<string, ValidateFunction | null>;
}

/** Every operation of the documents, each schema compiled now (as a proxy does when it starts). */
function compileOperations(documents: Record<string, Json>): Operation[] {
  const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, allowUnionTypes: true });
  addFormats(ajv);
  const operations: Operation[] = [];
  for (const [id, doc] of Object.entries(documents)) {
    const local = (schema: unknown) => JSON.parse(JSON.stringify(schema).replace(/"#\/components\/schemas\//g, `"${id}#/$defs/`));
    ajv.addSchema({ $id: id, $defs: local(doc.components.schemas) });
    const json = (content: Json) => (content?.['application/json'] ? ajv.compile(local(content['application/json'].schema)) : null);
    const prefix = doc.servers[0].url as string;
    for (const [path, item] of Object.entries<Json>(doc.paths)) {
      for (const [method, op] of Object.entries<Json>(item)) {
        operations.push({
          method: method.toUpperCase(),
          pattern: new RegExp(`^${prefix}${path.replace(/\{\w+\}/g, '[^/]+')}$`),
          name: `${id} ${op.operationId}`,
          body: op.requestBody ? json(op.requestBody.content) : null,
          responses: Object.fromEntries(Object.entries<Json>(op.responses).map(([status, r]) => [status, json(r.content)])),
        });
      }
    }
  }
  return operations;
}

const read = async (stream: IncomingMessage | Response): Promise<string> => {
  if (stream instanceof Response) return stream.text();
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
};
const errorsOf = (validate: ValidateFunction, value: unknown) =>
  validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`);

/** The proxy: forwards to `target`, records each exchange and every way it breaks the documents. */
function startProxy(target: string, operations: Operation[]): Promise<{ server: Server; url: string; exchanges: string[]; violations: string[] }> {
  const exchanges: string[] = [];
  const violations: string[] = [];
  const server = createServer((request: IncomingMessage, reply: ServerResponse) => {
    void (async () => {
      const body = await read(request);
      const path = new URL(request.url!, target).pathname;
      const at = `${request.method} ${request.url}`;
      const op = operations.find((o) => o.method === request.method && o.pattern.test(path));
      if (!op) violations.push(`${at}: no such operation in the documents`);
      else if (body !== '' && op.body) violations.push(...errorsOf(op.body, JSON.parse(body)).map((e) => `${at} request body: ${e}`));
      else if (body !== '') violations.push(`${at}: a body where the document declares none`);
      const headers = Object.fromEntries(
        ['authorization', 'content-type', 'idempotency-key'].filter((h) => request.headers[h]).map((h) => [h, String(request.headers[h])]),
      );
      const answer = await fetch(`${target}${request.url}`, { method: request.method, headers, body: body === '' ? undefined : body });
      const text = await read(answer);
      exchanges.push(`${at} → ${answer.status}${op ? ` (${op.name})` : ''}`);
      if (op && !(String(answer.status) in op.responses)) violations.push(`${at}: status ${answer.status} is not documented`);
      const validate = op?.responses[String(answer.status)];
      if (validate) violations.push(...errorsOf(validate, JSON.parse(text)).map((e) => `${at} → ${answer.status}: ${e}`));
      reply.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' }).end(text);
    })().catch((error: Error) => {
      violations.push(`${request.method} ${request.url}: ${error.message}`);
      reply.writeHead(502).end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, exchanges, violations })),
  );
}

describe('a validating proxy started from the OpenAPI documents', () => {
  let gw: InvoiceGateway;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  beforeAll(async () => {
    gw = await startInvoiceGateway();
  });
  beforeAll(async () => {
    const merchant = await api(gw.baseUrl).get('/v1/openapi.json');
    const operator = await gw.operator.http.get('/admin/v1/openapi.json');
    proxy = await startProxy(gw.baseUrl, compileOperations({ merchant: merchant.body, operator: operator.body }));
  }, 30_000);
  afterAll(async () => {
    proxy?.server.close();
    await gw?.close();
  });

  it('passes a whole flow (create, get, list, pay, refund) with no request or answer outside the documents', async () => {
    const operator = new Operator(proxy.url, gw.gateway.adminToken);
    const merchant = await operator.merchant({ holdHours: 0 });
    const client = api(proxy.url, merchant.keys.test.secretKey);
    const created = await client.post('/v1/invoices', {
      amount: '1500.00',
      orderId: orderId(),
      method: 'sbp',
      customFields: { cart: [{ sku: 'A-1', qty: 2 }], gift: true },
    });
    expectStatus(created, 201);
    const id = created.body.id as string;
    expectStatus(await client.get(`/v1/invoices/${id}`), 200);
    await poll(
      () => client.get('/v1/invoices?limit=10'),
      (r) => r.body.items?.some((i: Json) => i.id === id),
      'the invoice in the list',
    );
    expectStatus(await operator.payment(id, 'paid'), 200);
    await poll(
      () => client.get('/v1/balance'),
      (r) => r.body.available !== '0.00',
      'the payment available',
    );
    const refund = await client.post(`/v1/invoices/${id}/refund`, { amount: '500.00' });
    expectStatus(refund, 202);
    expectStatus(await client.get(`/v1/refunds/${refund.body.id}`), 200);
    // A request outside the documents is named by the proxy.
    await client.get('/v1/no-such-thing');

    expect(proxy.violations).toEqual(['GET /v1/no-such-thing: no such operation in the documents']);
    expect(proxy.exchanges).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^POST \/admin\/v1\/projects → 201 \(operator createProject\)$/),
        expect.stringMatching(/^POST \/v1\/invoices → 201 \(merchant createInvoice\)$/),
        expect.stringMatching(/^GET \/v1\/invoices\/\S+ → 200 \(merchant getInvoice\)$/),
        expect.stringMatching(/^GET \/v1\/invoices\?limit=10 → 200 \(merchant listInvoices\)$/),
        expect.stringMatching(/^POST \/admin\/v1\/invoices\/\S+\/payment → 200 \(operator \w+\)$/),
        expect.stringMatching(/^POST \/v1\/invoices\/\S+\/refund → 202 \(merchant refundInvoice\)$/),
        expect.stringMatching(/^GET \/v1\/refunds\/\S+ → 200 \(merchant getRefund\)$/),
      ]),
    );
  });
});
