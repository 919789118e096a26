/**
 * The receiver recipes of docs/webhook-verification.md, read from the page and run as
 * printed against a delivery the gateway sent: the stock Standard Webhooks verifier's
 * three lines, and the `node:crypto`-only receiver (a whole program, started in a
 * process of its own; only its port, 4000 on the page, is taken from the system so that
 * the test never collides with another). The SDK's recipe is its `verifyWebhook`, tested
 * in test/sdk.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expectStatus, InvoiceGateway, Merchant, orderId } from '../support/merchant-fixtures';
import { hookedGateway, ReceivedWebhook, WebhookReceiver } from '../support/webhook-receiver';

const PAGE = readFileSync(path.join(__dirname, '../../docs/webhook-verification.md'), 'utf8');

/** The first ```js block after `marker` on the page. */
function recipe(marker: string): string {
  const from = PAGE.indexOf(marker);
  if (from < 0) throw new Error(`docs/webhook-verification.md has no "${marker}"`);
  const block = /```js\n([\s\S]*?)```/.exec(PAGE.slice(from));
  if (!block) throw new Error(`no js block after "${marker}"`);
  return block[1]!;
}

/** Preloaded into the receiver: its listen(4000) takes a free port instead, printed once listening. */
const ANY_PORT = `
const net = require('node:net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (port, ...rest) {
  this.once('listening', () => process.stdout.write('port ' + this.address().port + '\\n'));
  return listen.call(this, port === 4000 ? 0 : port, ...rest);
};
`;

describe('docs/webhook-verification.md, its recipes run as printed', () => {
  let gw: InvoiceGateway;
  let receiver: WebhookReceiver;
  let shop: Merchant;
  let close: () => Promise<void>;
  let delivery: ReceivedWebhook;

  beforeAll(async () => {
    ({ gw, receiver, shop, close } = await hookedGateway());
    const created = await shop.test.post('/v1/invoices', { amount: '500.00', orderId: orderId('recipes'), method: 'sbp' });
    expectStatus(created, 201);
    expectStatus(await gw.operator.payment(created.body.id, 'paid'), 200);
    await receiver.waitFor((r) => r.length === 1, 'the invoice.paid delivery');
    delivery = receiver.received[0]!;
  });
  afterAll(() => close?.());

  it('the Standard Webhooks lines give the event, and refuse one changed byte', () => {
    const run = new Function('require', 'process', 'rawBody', 'headers', `${recipe('**With a stock Standard Webhooks verifier**')}\nreturn event;`);
    const env = { env: { WEBHOOK_SECRET: shop.project.webhookSecret } };
    expect(run(require, env, delivery.rawBody, delivery.headers)).toEqual(delivery.body);
    const changed = delivery.rawBody.replace('"invoice.paid"', '"invoice.pair"');
    expect(() => run(require, env, changed, delivery.headers)).toThrow(/signature/i);
  });

  it('the node:crypto receiver answers 200 to the delivery and handles it once; 400 to a changed byte or without the timestamped signature', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'webhook-recipe-'));
    writeFileSync(path.join(dir, 'any-port.cjs'), ANY_PORT);
    writeFileSync(path.join(dir, 'receiver.mjs'), recipe('## Without the SDK'));
    const child = spawn(process.execPath, ['-r', path.join(dir, 'any-port.cjs'), path.join(dir, 'receiver.mjs')], {
      env: { PATH: process.env.PATH ?? '', WEBHOOK_SECRET: shop.project.webhookSecret },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    try {
      const port = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the receiver did not listen: ${output}`)), 10_000);
        child.stdout.on('data', () => {
          const match = /^port (\d+)$/m.exec(output);
          if (!match) return;
          clearTimeout(timer);
          resolve(Number(match[1]));
        });
        child.once('exit', (code) => reject(new Error(`the receiver exited (${code}): ${output}`)));
      });
      const send = async (body: string, drop: string[] = []) => {
        const headers = Object.fromEntries(
          Object.entries(delivery.headers).filter(([name]) => !['host', 'content-length', 'connection', ...drop].includes(name)),
        ) as Record<string, string>;
        const response = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers, body });
        return { status: response.status, text: await response.text() };
      };
      expect(await send(delivery.rawBody)).toEqual({ status: 200, text: 'ok' });
      expect(await send(delivery.rawBody)).toEqual({ status: 200, text: 'ok' });
      expect(await send(delivery.rawBody.replace('"500.00"', '"501.00"'))).toEqual({ status: 400, text: 'refused' });
      expect(await send(delivery.rawBody, ['x-service-signature-timestamped'])).toEqual({ status: 400, text: 'refused' });
      // Handled once: the repeated delivery printed nothing more.
      expect(output.split('\n').filter((line) => line.startsWith('invoice.paid '))).toHaveLength(1);
    } finally {
      child.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
