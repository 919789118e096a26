/**
 * Prism's stock validating proxy (`prism proxy --errors`) started from the OpenAPI
 * documents as a third party gets them (GET /v1/openapi.json, GET /admin/v1/openapi.json
 * with the operator token), then a merchant's flow sent through it: create an invoice,
 * get it, list, pay it through the operator API, refund, get the refund. Prism checks
 * each request (route, security, parameters, body) and each real answer (documented
 * status, media type, headers, body); with --errors it answers a violation itself
 * (422 or 500, problem+json) and logs it. Issue 37: it must be listening within 30 s.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { api, expectStatus, InvoiceGateway, Json, orderId, poll, Reply, startInvoiceGateway, UUID } from '../support/merchant-fixtures';

const PRISM = path.resolve(__dirname, '../../node_modules/.bin/prism');
/** What Prism prints for a violation: a `Violation:` line, or an answer of its own instead of the gateway's. */
const VIOLATION = /Violation:|Request terminated with error/;

interface Prism {
  readonly url: string;
  readonly startupMs: number;
  readonly child: ChildProcess;
  output(): string;
}

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });

/** `prism proxy <document> <upstream> --errors`, resolved once it prints that it listens. */
async function startPrism(document: string, upstream: string): Promise<Prism> {
  const port = await freePort();
  const started = Date.now();
  const child = spawn(PRISM, ['proxy', document, upstream, '--errors', '-p', String(port), '-h', '127.0.0.1'], {
    env: { PATH: process.env.PATH ?? '', FORCE_COLOR: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  const ready = new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (/Prism is listening on/.test(text)) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`prism exited (${code}) before listening:\n${text}`)));
  });
  await ready;
  return { url: `http://127.0.0.1:${port}`, startupMs: Date.now() - started, child, output: () => text };
}

/** The gateway's own answer: no `sl-violations` header (Prism adds it for a warning it lets through). */
function expectClean(reply: Reply, status: number): Json {
  expectStatus(reply, status);
  expect(reply.headers.get('sl-violations')).toBeNull();
  expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
  return reply.body;
}

describe("Prism's validating proxy started from the OpenAPI documents", () => {
  let gw: InvoiceGateway;
  let dir: string;
  let merchantPrism: Prism;
  let operatorPrism: Prism;
  beforeAll(async () => {
    gw = await startInvoiceGateway();
    dir = mkdtempSync(path.join(tmpdir(), 'prism-'));
    const documents = {
      merchant: (await api(gw.baseUrl).get('/v1/openapi.json')).body,
      operator: (await gw.operator.http.get('/admin/v1/openapi.json')).body,
    };
    for (const [name, doc] of Object.entries(documents)) {
      // As served: no edit, so what a third party gets is what Prism checks.
      writeFileSync(path.join(dir, `${name}.json`), JSON.stringify(doc));
    }
    // One Prism per document (it reads one): the operator calls of the flow are checked too.
    // Prism matches the document's paths without the servers prefix (/v1, /admin/v1), so
    // the prefix goes on the upstream: Prism's URL stands for `<gateway>/v1`.
    [merchantPrism, operatorPrism] = await Promise.all([
      startPrism(path.join(dir, 'merchant.json'), `${gw.baseUrl}/v1`),
      startPrism(path.join(dir, 'operator.json'), `${gw.baseUrl}/admin/v1`),
    ]);
  }, 90_000);
  /** A new account and project through the operator's Prism (payments held 0 h): its test secret key. */
  async function merchantKey(): Promise<string> {
    const operator = api(operatorPrism.url, gw.gateway.adminToken);
    const account = expectClean(await operator.post('/accounts', { name: 'ООО Ромашка', email: `owner-${orderId()}@example.com` }), 201);
    return expectClean(await operator.post('/projects', { accountId: account.id, name: 'Магазин', holdHours: 0 }), 201).keys.test.secretKey;
  }
  afterAll(async () => {
    for (const prism of [merchantPrism, operatorPrism]) {
      if (prism && prism.child.exitCode === null) {
        const exited = new Promise((resolve) => prism.child.once('exit', resolve));
        prism.child.kill();
        await exited;
      }
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    await gw?.close();
  });

  it('is listening within 30 s of starting, as issue 37 requires', () => {
    expect(merchantPrism.startupMs).toBeLessThan(30_000);
    expect(operatorPrism.startupMs).toBeLessThan(30_000);
  });

  it('passes a whole flow (create, get, list, pay, refund) with no schema violation', async () => {
    const from = [merchantPrism.output().length, operatorPrism.output().length];
    const operator = api(operatorPrism.url, gw.gateway.adminToken);
    const client = api(merchantPrism.url, await merchantKey());

    const created = expectClean(
      await client.post('/invoices', {
        amount: '1500.00',
        orderId: orderId(),
        method: 'sbp',
        customFields: { cart: [{ sku: 'A-1', qty: 2 }], gift: true },
      }),
      201,
    );
    expect(created).toMatchObject({ id: expect.stringMatching(UUID), status: 'created', amount: '1500.00' });
    expect(expectClean(await client.get(`/invoices/${created.id}`), 200)).toMatchObject({ id: created.id, status: 'created' });
    const list = await poll(
      () => client.get('/invoices?limit=10'),
      (r) => r.body.items?.some((i: Json) => i.id === created.id),
      'the invoice in the list',
    );
    expectClean(list, 200);
    expect(expectClean(await operator.post(`/invoices/${created.id}/payment`, { outcome: 'paid' }), 200)).toMatchObject({
      id: created.id,
      status: 'paid',
    });
    await poll(
      () => client.get('/balance'),
      (r) => r.body.available !== '0.00',
      'the payment available',
    );
    const refund = expectClean(await client.post(`/invoices/${created.id}/refund`, { amount: '500.00' }), 202);
    expect(refund).toMatchObject({ id: expect.stringMatching(/^rf_/), invoiceId: created.id, amount: '500.00', status: 'pending' });
    expect(expectClean(await client.get(`/refunds/${refund.id}`), 200)).toMatchObject({ id: refund.id, amount: '500.00' });

    // Each call went through a Prism to the gateway (none answered by Prism alone) and
    // Prism printed no violation (it prints those of a call before answering it).
    const printed = () => merchantPrism.output().slice(from[0]) + operatorPrism.output().slice(from[1]);
    await poll(
      async () => printed(),
      (text) => text.includes(`The upstream call to /refunds/${refund.id} has returned 200`),
      'the last call in the output',
    );
    expect(
      printed()
        .split('\n')
        .filter((line) => VIOLATION.test(line)),
    ).toEqual([]);
    expect(printed().match(/The upstream call to \S+ has returned \d+/g)).toEqual(
      expect.arrayContaining([
        'The upstream call to /accounts has returned 201',
        'The upstream call to /projects has returned 201',
        'The upstream call to /invoices has returned 201',
        `The upstream call to /invoices/${created.id} has returned 200`,
        'The upstream call to /invoices has returned 200',
        `The upstream call to /invoices/${created.id}/payment has returned 200`,
        `The upstream call to /invoices/${created.id}/refund has returned 202`,
        `The upstream call to /refunds/${refund.id} has returned 200`,
      ]),
    );
  });

  it('answers and prints a violation itself, so the flow above can fail', async () => {
    const from = merchantPrism.output().length;
    const reply = await api(merchantPrism.url, await merchantKey()).post('/invoices', { amount: { rub: 15 } });
    expect(reply.status).toBe(422);
    expect(reply.headers.get('content-type')).toBe('application/problem+json');
    expect(reply.body.validation).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ location: ['body'], message: "Request body must have required property 'orderId'" }),
        expect.objectContaining({ location: ['body', 'amount'] }),
      ]),
    );
    // Prism logs after it answers.
    await poll(
      async () => merchantPrism.output().slice(from),
      (printed) => VIOLATION.test(printed),
      'the violation in the output',
    );
  });
});
