/**
 * A real local webhook receiver for end-to-end tests: an HTTP server that records
 * every request (raw body, headers, time) and answers as the test says (2xx by
 * default; a status, a delay or a dropped connection per request).
 */
import { createHmac } from 'node:crypto';
import http, { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InvoiceGateway, Merchant, ProjectSetup, startInvoiceGateway } from './merchant-fixtures';

export interface ReceivedWebhook {
  readonly path: string;
  readonly rawBody: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any;
  readonly headers: IncomingHttpHeaders;
  readonly receivedAt: number;
}

/** `after`: the answer is sent once this settles (a test holds one request and lets it go when it chooses). */
export type Answer = { status: number; body?: string; delayMs?: number; after?: Promise<unknown> } | 'hang' | 'drop';

export interface WebhookReceiver {
  readonly url: string;
  readonly received: ReceivedWebhook[];
  /** How to answer the next requests (called per request, in order); default 200. */
  answer: (request: ReceivedWebhook, index: number) => Answer;
  /** Waits until `predicate` holds on what was received. */
  waitFor(predicate: (received: readonly ReceivedWebhook[]) => boolean, what: string, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** A receiver on 127.0.0.1, or on `host` (for instance an address of another interface of this machine). */
export async function startWebhookReceiver(host = '127.0.0.1'): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const hanging = new Set<http.ServerResponse>();
  const receiver: WebhookReceiver = {
    url: '',
    received,
    answer: () => ({ status: 200, body: 'ok' }),
    async waitFor(predicate, what, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(received)) {
        if (Date.now() > deadline)
          throw new Error(`timed out waiting for ${what}; received ${received.length}: ${received.map((r) => r.headers['x-service-event']).join(', ')}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    close: () =>
      new Promise((resolve) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      let body: unknown = null;
      try {
        body = JSON.parse(rawBody);
      } catch {
        body = null;
      }
      const webhook: ReceivedWebhook = { path: req.url ?? '/', rawBody, body, headers: req.headers, receivedAt: Date.now() };
      received.push(webhook);
      const answer = receiver.answer(webhook, received.length - 1);
      if (answer === 'hang') {
        hanging.add(res);
        return;
      }
      if (answer === 'drop') {
        req.socket.destroy();
        return;
      }
      const send = () => res.writeHead(answer.status, { 'content-type': 'text/plain' }).end(answer.body ?? '');
      if (answer.after) void answer.after.finally(send);
      else if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const hostInUrl = host.includes(':') ? `[${host}]` : host;
  (receiver as { url: string }).url = `http://${hostInUrl}:${(server.address() as AddressInfo).port}/hooks`;
  return receiver;
}

/** What the merchant checks: sha256= and the hex HMAC-SHA256 of the raw body with the webhook secret. */
export function validSignature(webhook: ReceivedWebhook, secret: string): boolean {
  return webhook.headers['x-service-signature'] === `sha256=${createHmac('sha256', secret).update(webhook.rawBody).digest('hex')}`;
}

/** The second signature: `t=<X-Service-Timestamp>,v2=<hex HMAC-SHA256 of "webhook.<t>.<raw body>">`, written from the docs. */
export function validTimestampedSignature(webhook: ReceivedWebhook, secret: string): boolean {
  const t = webhook.headers['x-service-timestamp'];
  const mac = createHmac('sha256', secret)
    .update(`webhook.${String(t)}.${webhook.rawBody}`)
    .digest('hex');
  return webhook.headers['x-service-signature-timestamped'] === `t=${String(t)},v2=${mac}`;
}

/**
 * The set-up of the webhook tests over HTTP: a local receiver, a gateway on the manual
 * clock (retries are due when the test moves it) allowed to deliver to loopback, and a
 * merchant whose webhooks go to the receiver.
 */
export async function hookedGateway(
  setup: ProjectSetup = {},
): Promise<{ gw: InvoiceGateway; receiver: WebhookReceiver; shop: Merchant; close(): Promise<void> }> {
  const receiver = await startWebhookReceiver();
  const gw = await startInvoiceGateway({ CLOCK: 'manual', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  const shop = await gw.operator.merchant({ webhookUrl: receiver.url, ...setup } as never);
  return { gw, receiver, shop, close: async () => (await gw.close(), await receiver.close()) };
}
