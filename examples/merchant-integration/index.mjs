// A complete merchant integration with the SDK, against a running gateway:
//   create an invoice → pay it on the sandbox payment page → receive and verify the
//   invoice.paid webhook → refund part of it → receive and verify refund.succeeded →
//   read the balance.
//
// Run it (docs/sdk.md, "The example"):
//   WEBHOOK_ALLOW_PRIVATE_NETWORKS=true npm start          # in one terminal
//   ADMIN_TOKEN=<the printed operator token> npm run example   # in another
//
// Environment: GATEWAY_URL (default http://127.0.0.1:3000); ADMIN_TOKEN (the operator
// token: the example sets up its own sandbox project, as the merchant dashboard would,
// with its webhook pointing at the receiver below); WEBHOOK_PORT (default 4000; 0: any
// free port); TIMEOUT_SECONDS for each wait (default 60).
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { PaymentGatewayClient, PaymentGatewayError, verifyWebhook, WebhookVerificationError } from '../../libs/sdk/dist/index.js';

const GATEWAY_URL = (process.env.GATEWAY_URL ?? 'http://127.0.0.1:3000').replace(/(?<!\/)\/+$/, '');
const ADMIN_TOKEN = process.env.ADMIN_TOKEN;
const WEBHOOK_PORT = Number(process.env.WEBHOOK_PORT ?? 4000);
const TIMEOUT_MS = Number(process.env.TIMEOUT_SECONDS ?? 60) * 1000;

const step = (n, text) => console.log(`${n}. ${text}`);

// --- The webhook receiver: verifies every delivery on its raw bytes, answers 2xx fast ---

let webhookSecret = null;
const events = [];
const waiters = new Set();

const receiver = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const rawBody = Buffer.concat(chunks);
    try {
      // Both signatures; the timestamped one refuses a delivery older than 5 minutes.
      const event = verifyWebhook(rawBody, req.headers, webhookSecret ?? '-', { toleranceSeconds: 300, requireTimestamp: true });
      res.writeHead(200).end('ok');
      // Idempotent by event id: a repeated delivery of the same event is acknowledged, not processed twice.
      if (events.some((e) => e.id === event.id)) return;
      events.push(event);
      for (const waiter of waiters) waiter();
    } catch (error) {
      const code = error instanceof WebhookVerificationError ? error.code : 'error';
      console.error(`   refused a webhook: ${code}: ${error.message}`);
      res.writeHead(400).end(code);
    }
  });
});

/** The first verified event of `type` that `matches`. */
function webhook(type, matches) {
  return new Promise((resolve, reject) => {
    const check = () => {
      const event = events.find((e) => e.type === type && matches(e));
      if (!event) return;
      waiters.delete(check);
      clearTimeout(timer);
      resolve(event);
    };
    const timer = setTimeout(() => {
      waiters.delete(check);
      reject(new Error(`no ${type} webhook within ${TIMEOUT_MS / 1000} s`));
    }, TIMEOUT_MS);
    waiters.add(check);
    check();
  });
}

async function until(read, done, what) {
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

// --- The set-up the merchant dashboard does: an account and a sandbox project (operator API) ---

async function operator(path, body) {
  const response = await fetch(`${GATEWAY_URL}/admin/v1${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(`operator API ${path}: HTTP ${response.status} ${JSON.stringify(answer)}`);
  return answer;
}

// --- The buyer: pays on the payment page's sandbox form ---

async function payOnSandboxPage(invoiceUrl) {
  const page = await fetch(invoiceUrl);
  const html = await page.text();
  // The form's hidden fields: its token, and the method and total the buyer confirms.
  const fields = Object.fromEntries([...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1], m[2]]));
  if (!page.ok || fields.formToken === undefined) throw new Error(`the payment page ${invoiceUrl} has no sandbox form (HTTP ${page.status})`);
  const paid = await fetch(`${invoiceUrl}/sandbox`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ ...fields, outcome: 'paid' }).toString(),
    redirect: 'manual',
  });
  if (paid.status !== 303 && paid.status !== 302) throw new Error(`the sandbox payment answered HTTP ${paid.status}`);
}

async function main() {
  if (!ADMIN_TOKEN) throw new Error('ADMIN_TOKEN is required (the operator token npm start printed)');
  await new Promise((resolve) => receiver.listen(WEBHOOK_PORT, '127.0.0.1', resolve));
  const webhookUrl = `http://127.0.0.1:${receiver.address().port}/webhooks`;

  const account = await operator('/accounts', { name: 'ООО Пример', email: `example-${randomUUID()}@example.com` });
  // holdHours 0: paid money is available at once, so the example can refund it.
  const project = await operator('/projects', { accountId: account.id, name: 'Пример интеграции', holdHours: 0, webhookUrl });
  webhookSecret = project.webhookSecret;
  step(0, `sandbox project ${project.id}, webhooks to ${webhookUrl}`);

  const gateway = new PaymentGatewayClient({ baseUrl: `${GATEWAY_URL}/v1`, auth: { secretKey: project.keys.test.secretKey } });

  const invoice = await gateway.createInvoice({ amount: '1500.00', orderId: `example-${randomUUID()}`, method: 'sbp', description: 'Заказ из примера' });
  step(1, `invoice created: ${invoice.id}, ${invoice.amount} RUB, the buyer pays ${invoice.payableAmount}, page ${invoice.url}`);

  await payOnSandboxPage(invoice.url);
  step(2, 'paid on the sandbox payment page');

  const paid = await webhook('invoice.paid', (e) => e.data.invoice.id === invoice.id);
  step(3, `webhook invoice.paid verified: event ${paid.id}, invoice ${paid.data.invoice.status}, net ${paid.data.invoice.netAmount}`);

  await until(
    () => gateway.getBalance(),
    (b) => Number(b.available) > 0,
    'the paid amount in the balance',
  );
  const refund = await gateway.refundInvoice(invoice.id, { amount: '500.00' });
  step(4, `refund requested: ${refund.id}, ${refund.amount} RUB, ${refund.status}`);

  const refunded = await webhook('refund.succeeded', (e) => e.data.refund.id === refund.id);
  step(5, `webhook refund.succeeded verified: refund ${refunded.data.refund.status}, invoice ${refunded.data.invoice.status}`);

  // The balance is a read model: the refund's settlement reaches it a moment after the webhook.
  const balance = await until(
    () => gateway.getBalance(),
    (b) => Number(b.reserved ?? 0) === 0,
    'the refund settled in the balance',
  );
  step(6, `balance: available ${balance.available}, pending ${balance.pending}, reserved ${balance.reserved ?? '0.00'} ${balance.currency}`);
}

/** Stops the receiver (and the gateway's kept-alive connections to it) and exits. */
function finish(code) {
  receiver.closeAllConnections();
  receiver.close();
  process.exit(code);
}

main()
  .then(() => {
    console.log('done');
    finish(0);
  })
  .catch((error) => {
    if (error instanceof PaymentGatewayError) console.error(`gateway error ${error.status} ${error.code} (${error.param ?? '-'}): ${error.message}`);
    else console.error(error instanceof Error ? error.message : error);
    finish(1);
  });
