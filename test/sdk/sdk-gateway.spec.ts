/**
 * The SDK against the compiled gateway (CLOCK=manual, webhooks to loopback allowed):
 * both auth modes, typed errors as the gateway sends them, the paging iterator over
 * more than one page, a refund retried under its Idempotency-Key (within a call, and by
 * the caller with the key its error names after every answer was lost), the clock skew of
 * HMAC mode corrected from X-Server-Time, and verifyWebhook on a real delivery to a
 * local receiver (and its refusals: tampered body, wrong secret, old timestamp). Also: a
 * create tells "made now" from "already there", a call's signal cancels it, and a wrong
 * HMAC secret costs one failed authentication, not one per retry.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expectStatus, InvoiceGateway, Json, poll, startInvoiceGateway } from '../support/merchant-fixtures';
import { sendSigned } from '../support/signing';
import { ReceivedWebhook, startWebhookReceiver, WebhookReceiver } from '../support/webhook-receiver';
import {
  PaymentGatewayAbortError,
  PaymentGatewayClient,
  PaymentGatewayConnectionError,
  PaymentGatewayError,
  verifyWebhook,
  WebhookVerificationError,
} from '../../libs/sdk/src';
import type { InvoiceEvent, WebhookEvent } from '../../libs/sdk/src';

interface Shop {
  readonly projectId: string;
  readonly secret: string;
  readonly keys: { test: { secretKey: string; publicKey: string } };
}

describe('the SDK against the gateway', () => {
  let gw: InvoiceGateway;
  let receiver: WebhookReceiver;
  let shop: Shop;
  let bearer: PaymentGatewayClient;
  let hmac: PaymentGatewayClient;

  const orderId = () => `sdk-${randomUUID()}`;
  const noWait = async () => {};
  /** A project of its own (hold 0 h) with a paid 1,000.00 invoice whose amount is available, and a client of its test key. */
  const paidInvoiceOfNewProject = async () => {
    const accountId = await gw.operator.createAccount();
    const project = await gw.operator.createProject(accountId, { holdHours: 0 });
    const direct = new PaymentGatewayClient({ baseUrl: `${gw.baseUrl}/v1`, auth: { secretKey: project.keys.test.secretKey } });
    const created = await direct.createInvoice({ amount: '1000.00', orderId: orderId(), method: 'sbp' });
    expectStatus(await gw.operator.payment(created.id, 'paid'), 200);
    await poll(
      () => direct.getBalance(),
      (b) => b.available !== '0.00',
      'the paid amount to be available',
    );
    return { project, direct, created };
  };

  beforeAll(async () => {
    // CLOCK=manual: the test moves the gateway's clock past a refund's processing. REFUND_PROCESSING_SECONDS=1: refunds complete within the
    // test's wait. WEBHOOK_ALLOW_PRIVATE_NETWORKS: the SDK's receiver listens on 127.0.0.1.
    gw = await startInvoiceGateway({ CLOCK: 'manual', REFUND_PROCESSING_SECONDS: '1', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    receiver = await startWebhookReceiver();
    const accountId = await gw.operator.createAccount();
    const r = await gw.operator.http.post('/admin/v1/projects', { accountId, name: 'Магазин SDK', holdHours: 0, webhookUrl: receiver.url });
    expectStatus(r, 201);
    shop = { projectId: r.body.id, secret: r.body.webhookSecret, keys: r.body.keys };
    bearer = new PaymentGatewayClient({ baseUrl: `${gw.baseUrl}/v1`, auth: { secretKey: shop.keys.test.secretKey } });
    hmac = new PaymentGatewayClient({ baseUrl: `${gw.baseUrl}/v1`, auth: { publicId: shop.keys.test.publicKey, signingSecret: shop.secret } });
  });
  afterAll(async () => {
    await receiver?.close();
    await gw?.close();
  });

  it('Bearer mode: creates an invoice (201, then the same on a repeat), reads it, lists methods and the balance', async () => {
    const id = orderId();
    const created = await bearer.createInvoice({ amount: '1500.00', orderId: id, method: 'sbp' });
    expect(created).toMatchObject({ status: 'created', amount: '1500.00', feePct: expect.any(String) });
    expect(await bearer.createInvoice({ amount: '1500.00', orderId: id, method: 'sbp' })).toEqual(created);
    const read = await bearer.getInvoice(created.id);
    expect(read).toMatchObject({ id: created.id, orderId: id, currency: 'RUB', isTest: true });
    expect((await bearer.listMethods()).methods.map((m) => m.code)).toEqual(['sbp', 'card', 'crypto']);
    expect(await bearer.getBalance()).toMatchObject({ currency: 'RUB', available: expect.stringMatching(/^\d+\.\d{2}$/) });
  });

  it('HMAC mode: the same calls signed with the public key and the webhook secret (a new signature per request)', async () => {
    const created = await hmac.createInvoice({ amount: '200.00', orderId: orderId(), method: 'card' });
    expect((await hmac.getInvoice(created.id)).id).toBe(created.id);
    expect((await hmac.listMethods()).methods).toHaveLength(3);
    await hmac.getBalance();
    const order = (await hmac.getInvoice(created.id)).orderId;
    // The list is a read model: wait until the invoices projection has the new invoice.
    let page = await hmac.listInvoices({ orderId: order });
    for (const deadline = Date.now() + 10_000; page.items.length === 0 && Date.now() < deadline;) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      page = await hmac.listInvoices({ orderId: order });
    }
    expect(page.items.map((i) => i.id)).toEqual([created.id]);
  });

  it('errors arrive typed with the gateway code, param and details, after one attempt', async () => {
    const invalid = await bearer.createInvoice({ amount: 'много', orderId: orderId() }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(PaymentGatewayError);
    expect(invalid).toMatchObject({ status: 400, code: 'validation', param: 'amount', attempts: 1 });
    expect((invalid as PaymentGatewayError).details).toEqual(expect.arrayContaining([expect.objectContaining({ param: 'amount' })]));
    expect((invalid as PaymentGatewayError).message).toMatch(/[А-Яа-я]/);

    const missing = await bearer.getInvoice(randomUUID()).catch((e: unknown) => e);
    expect(missing).toMatchObject({ status: 404, code: 'invoice_not_found', attempts: 1 });

    const id = orderId();
    await bearer.createInvoice({ amount: '100.00', orderId: id });
    const conflict = await bearer.createInvoice({ amount: '101.00', orderId: id }).catch((e: unknown) => e);
    expect(conflict).toMatchObject({ status: 409, code: 'order_id_conflict', attempts: 1 });

    const badKey = new PaymentGatewayClient({ baseUrl: `${gw.baseUrl}/v1`, auth: { secretKey: 'sk_test_unknown' }, sleep: noWait });
    await expect(badKey.getBalance()).rejects.toMatchObject({ status: 401, code: 'unauthorized', attempts: 1 });
  });

  it('a baseUrl without the version /v1 is refused at construction, not sent to answer 404 for every path', async () => {
    const auth = { secretKey: shop.keys.test.secretKey };
    // Without the check each call is the router's 404 not_found, which getPayoutByOrderId reads as "no such payout".
    for (const baseUrl of [gw.baseUrl, `${gw.baseUrl}/`, `${gw.baseUrl}/v2`, `${gw.baseUrl}/v1?x=1`]) {
      expect(() => new PaymentGatewayClient({ baseUrl, auth })).toThrow(
        new TypeError(
          `baseUrl: an http(s) address ending in the API's version /v1, e.g. https://pay.example.com/v1; got ${new URL(baseUrl).origin}${new URL(baseUrl).pathname}${baseUrl.includes('?') ? ' (with a query or fragment)' : ''}`,
        ),
      );
    }
    expect(() => new PaymentGatewayClient({ baseUrl: 'pay.example.com/v1', auth })).toThrow(TypeError);
    expect(await new PaymentGatewayClient({ baseUrl: `${gw.baseUrl}/v1/`, auth }).getBalance()).toMatchObject({ currency: 'RUB' });
  });

  it('a baseUrl with a space or line break, a bare ? or #, an empty path segment or a user is refused, not sent elsewhere', async () => {
    const auth = { secretKey: shop.keys.test.secretKey };
    const example = "baseUrl: an http(s) address ending in the API's version /v1, e.g. https://pay.example.com/v1";
    const { origin } = new URL(gw.baseUrl);
    // Before, each was accepted and its calls went to another address: /v1%20/…, /v1?/…, /v1#/… (no path at all), //v1/….
    const refused: Array<[string, string]> = [
      [`${origin}/v1 `, '; it holds a space, tab or line break (read with it from a file?)'],
      [`${origin}/v1\n`, '; it holds a space, tab or line break (read with it from a file?)'],
      [` ${origin}/v1`, '; it holds a space, tab or line break (read with it from a file?)'],
      [`${origin}/v1?`, `; got ${origin}/v1 (with a query or fragment)`],
      [`${origin}/v1#`, `; got ${origin}/v1 (with a query or fragment)`],
      [`${origin}//v1`, `; got ${origin}//v1 (an empty path segment)`],
      [`${origin.replace('://', '://user:pw@')}/v1`, `; got ${origin}/v1 (with a user or password)`],
    ];
    for (const [baseUrl, why] of refused) {
      expect(() => new PaymentGatewayClient({ baseUrl, auth })).toThrow(new TypeError(`${example}${why}`));
    }
    // Accepted: built from the parsed address (origin and path without trailing slashes), so the calls reach /v1/….
    for (const baseUrl of [`${origin}/v1//`, `${origin}/v1/.`, `${origin.toUpperCase()}/v1`]) {
      const sent: string[] = [];
      const client = new PaymentGatewayClient({ baseUrl, auth, fetch: (input, init) => (sent.push(String(input)), fetch(input, init)) });
      expect(await client.getBalance()).toMatchObject({ currency: 'RUB' });
      expect(sent).toEqual([`${origin}/v1/balance`]);
    }
  });

  it('iterateInvoices walks every page (limit 2 over 5 invoices: 3 requests), newest first', async () => {
    const accountId = await gw.operator.createAccount();
    const r = await gw.operator.http.post('/admin/v1/projects', { accountId, name: 'Листалка' });
    expectStatus(r, 201);
    const requests: string[] = [];
    const client = new PaymentGatewayClient({
      baseUrl: `${gw.baseUrl}/v1`,
      auth: { secretKey: r.body.keys.test.secretKey },
      fetch: (input, init) => {
        requests.push(String(input));
        return fetch(input, init);
      },
    });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await client.createInvoice({ amount: `${100 + i}.00`, orderId: orderId() })).id);
    await poll(
      () => client.listInvoices({ limit: 100 }),
      (page) => page.items.length === 5,
      'the list to show the five invoices',
    );
    requests.length = 0;
    const seen: string[] = [];
    for await (const invoice of client.iterateInvoices({ limit: 2 })) seen.push(invoice.id);
    expect(seen).toEqual([...ids].reverse());
    expect(requests).toHaveLength(3);
    expect(requests[0]).not.toContain('cursor=');
    expect(requests.slice(1).every((u) => u.includes('cursor='))).toBe(true);
  });

  it('a refund retried with its Idempotency-Key is one refund; its webhooks verify and come back typed', async () => {
    const created = await bearer.createInvoice({ amount: '1000.00', orderId: orderId(), method: 'sbp' });
    expectStatus(await gw.operator.payment(created.id, 'paid'), 200);
    const paid = await arrival(receiver, 'invoice.paid', created.id);
    const event = verifyWebhook(paid.rawBody, paid.headers, shop.secret);
    expect(event.type).toBe('invoice.paid');
    expect((event as InvoiceEvent).data.invoice).toMatchObject({ id: created.id, status: 'paid' });

    // The balance is available at once (holdHours 0) once the projection has the payment.
    await poll(
      () => bearer.getBalance(),
      (b) => b.available !== '0.00',
      'the paid amount to be available',
    );
    const key = randomUUID();
    const refund = await bearer.refundInvoice(created.id, { amount: '300.00' }, { idempotencyKey: key });
    expect(refund).toMatchObject({ invoiceId: created.id, amount: '300.00', status: 'pending' });
    // What a retry of a lost answer does: the same key gives the same refund, not a second one.
    expect(await bearer.refundInvoice(created.id, { amount: '300.00' }, { idempotencyKey: key })).toEqual(refund);

    await gw.operator.advance(2);
    const succeeded = await arrival(receiver, 'refund.succeeded', refund.id);
    const refundEvent: WebhookEvent = verifyWebhook(Buffer.from(succeeded.rawBody), new Headers(succeeded.headers as Record<string, string>), shop.secret);
    if (refundEvent.type !== 'refund.succeeded') throw new Error(`expected refund.succeeded, got ${refundEvent.type}`);
    expect(refundEvent.data.refund).toMatchObject({ id: refund.id, status: 'succeeded' });
    expect((await bearer.getInvoice(created.id)).status).toBe('partially_refunded');
  });

  it('a refund whose every answer is lost: the error names its Idempotency-Key, and the call repeated with it is the same refund', async () => {
    const { project, direct, created } = await paidInvoiceOfNewProject();
    // A proxy that passes each request to the gateway and drops every answer (a timeout after the gateway acted).
    const { answered, port, close } = await answerLosingProxy(gw.baseUrl, () => true);
    try {
      const lossy = new PaymentGatewayClient({ baseUrl: `http://127.0.0.1:${port}/v1`, auth: { secretKey: project.keys.test.secretKey }, sleep: noWait });
      const failure = await lossy.refundInvoice(created.id, { amount: '100.00' }).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(PaymentGatewayConnectionError);
      const { idempotencyKey, attempts, message } = failure as PaymentGatewayConnectionError;
      expect(attempts).toBe(5);
      // Every attempt carried the key the error names, and the gateway made one refund under it.
      expect(answered.map((a) => [a.status, a.key])).toEqual(Array.from({ length: 5 }, () => [202, idempotencyKey]));
      expect(message).toContain(`the gateway may have acted. Make the same call with the same Idempotency-Key ${idempotencyKey}`);
      const refundId = answered[0].body.id;
      expect(new Set(answered.map((a) => a.body.id))).toEqual(new Set([refundId]));

      // The caller repeats the call as the error says: the same refund, not a second one.
      const repeated = await direct.refundInvoice(created.id, { amount: '100.00' }, { idempotencyKey });
      expect(repeated).toMatchObject({ id: refundId, amount: '100.00' });
      const reserved = await poll(
        async () => {
          const rows: string[] = [];
          for await (const t of direct.iterateBalanceTransactions({ type: 'refund_reserved' })) rows.push(String(t.refundId));
          return rows;
        },
        (rows) => rows.length > 0,
        'the refund in the balance transactions',
      );
      // One refund (its rows in two buckets), not one per call.
      expect(new Set(reserved)).toEqual(new Set([refundId]));
    } finally {
      await close();
    }
  });

  it("a proxy's 502/504 page after the gateway refunded: retried under the same key, one refund; run out, the error says the outcome is unknown", async () => {
    const { project, direct, created } = await paidInvoiceOfNewProject();
    // nginx's pages for the first answers (the gateway acted: 202), then the gateway's own.
    const pages = [504, 502];
    const { answered, port, close } = await pageAnsweringProxy(gw.baseUrl, (n) => pages[n]);
    try {
      const waits: number[] = [];
      const proxied = new PaymentGatewayClient({
        baseUrl: `http://127.0.0.1:${port}/v1`,
        auth: { secretKey: project.keys.test.secretKey },
        sleep: async (ms) => void waits.push(ms),
      });
      const first = await proxied.refundInvoiceWithOutcome(created.id, { amount: '100.00' });
      // Three attempts under one key: the first made the refund, the third is its replay.
      expect(first).toMatchObject({ created: false, attempts: 3, refund: { amount: '100.00', status: 'pending' } });
      expect(waits).toEqual([250, 500]);
      expect(answered.map((a) => a.status)).toEqual([202, 202, 202]);
      expect(new Set(answered.map((a) => a.key)).size).toBe(1);
      expect(new Set(answered.map((a) => a.body.id))).toEqual(new Set([first.refund.id]));

      // Every answer a proxy's 504: the error says the outcome is unknown and names the key to repeat with.
      pages.length = 0;
      pages.push(...Array.from({ length: answered.length + 5 }, () => 504));
      const failure = await proxied.refundInvoice(created.id, { amount: '100.00' }).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(PaymentGatewayError);
      const { status, code, attempts, idempotencyKey, message } = failure as PaymentGatewayError;
      expect({ status, code, attempts }).toEqual({ status: 504, code: 'unexpected_response', attempts: 5 });
      expect(message).toContain(`The outcome is unknown: the gateway may have acted. Make the same call with the same Idempotency-Key ${idempotencyKey}`);
      const second = answered.slice(3);
      expect(second.map((a) => [a.status, a.key])).toEqual(Array.from({ length: 5 }, () => [202, idempotencyKey]));
      const repeated = await direct.refundInvoice(created.id, { amount: '100.00' }, { idempotencyKey });
      expect(repeated.id).toBe(second[0].body.id);

      // Two calls, two refunds (each with its rows in two buckets), none made twice.
      const reserved = await poll(
        async () => {
          const rows = new Set<string>();
          for await (const t of direct.iterateBalanceTransactions({ type: 'refund_reserved' })) rows.add(String(t.refundId));
          return rows;
        },
        (rows) => rows.size >= 2,
        'both refunds in the balance transactions',
      );
      expect(reserved).toEqual(new Set([first.refund.id, repeated.id]));
    } finally {
      await close();
    }
  });

  it('verifyWebhook refuses a tampered body, a wrong secret, an old timestamp and a missing signature with typed errors', async () => {
    const created = await bearer.createInvoice({ amount: '500.00', orderId: orderId(), method: 'sbp' });
    expectStatus(await gw.operator.payment(created.id, 'failed'), 200);
    const w = await arrival(receiver, 'invoice.failed', created.id);
    const t = Number(w.headers['x-service-timestamp']);
    // The second header: t is the delivery's X-Service-Timestamp (the gateway clock).
    expect(w.headers['x-service-signature-timestamped']).toMatch(new RegExp(`^t=${t},v2=[0-9a-f]{64}$`));
    const at = (seconds: number) => () => seconds * 1000;
    const refusal = (f: () => unknown): WebhookVerificationError => {
      try {
        f();
      } catch (error) {
        expect(error).toBeInstanceOf(WebhookVerificationError);
        return error as WebhookVerificationError;
      }
      throw new Error('verifyWebhook accepted it');
    };

    expect(verifyWebhook(w.rawBody, w.headers, shop.secret, { now: at(t + 299), toleranceSeconds: 300 }).type).toBe('invoice.failed');
    expect(refusal(() => verifyWebhook(w.rawBody.replace('"failed"', '"paid"'), w.headers, shop.secret, { now: at(t) })).code).toBe('signature_invalid');
    expect(refusal(() => verifyWebhook(w.rawBody, w.headers, 'another-secret', { now: at(t) })).code).toBe('signature_invalid');
    expect(refusal(() => verifyWebhook(w.rawBody, w.headers, shop.secret, { now: at(t + 301), toleranceSeconds: 300 })).code).toBe('timestamp_invalid');
    expect(refusal(() => verifyWebhook(w.rawBody, w.headers, shop.secret, { now: at(t - 61), toleranceSeconds: 60 })).code).toBe('timestamp_invalid');
    // A tolerance read from an unset variable (NaN) is the receiver's mistake, not "any age".
    expect(() => verifyWebhook(w.rawBody, w.headers, shop.secret, { now: at(t + 611), toleranceSeconds: Number(undefined) })).toThrow(TypeError);

    // A replay with a fresh t but the old v2 does not match: the timestamp is signed.
    const forgedT = {
      ...w.headers,
      'x-service-signature-timestamped': String(w.headers['x-service-signature-timestamped']).replace(`t=${t}`, `t=${t + 1000}`),
    };
    expect(refusal(() => verifyWebhook(w.rawBody, forgedT, shop.secret, { now: at(t + 1000) })).code).toBe('signature_invalid');

    // The delivery's parts are no API credential: its t and MAC as X-Timestamp and X-Signature over its body, sent to
    // the API with the project's public id, are refused (the same secret signs both; the webhook's MAC has a prefix).
    const mac = /v2=([0-9a-f]{64})$/.exec(String(w.headers['x-service-signature-timestamped']))![1]!;
    const replayed = await fetch(`${gw.baseUrl}/v1/invoices`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-public-id': shop.keys.test.publicKey, 'x-timestamp': String(t), 'x-signature': mac },
      body: w.rawBody,
    });
    expect({ status: replayed.status, code: ((await replayed.json()) as { error: { code: string } }).error.code }).toEqual({
      status: 401,
      code: 'signature_invalid',
    });

    const { ['x-service-signature']: _s, ...unsigned } = w.headers;
    expect(refusal(() => verifyWebhook(w.rawBody, unsigned, shop.secret)).code).toBe('signature_missing');
    const { ['x-service-signature-timestamped']: _t, ...untimed } = w.headers;
    // The timestamp is required by default; the spec's plain signature alone passes only when asked.
    expect(refusal(() => verifyWebhook(w.rawBody, untimed, shop.secret)).code).toBe('signature_missing');
    expect(verifyWebhook(w.rawBody, untimed, shop.secret, { requireTimestamp: false }).type).toBe('invoice.failed');
  });

  it('HMAC mode: a burst of GETs never signs ahead of the clock, so another process of the key is accepted at once', async () => {
    // Two processes signing with one key: two copies of the SDK's module, each with its own memory of the seconds used.
    let OtherProcessClient!: typeof PaymentGatewayClient;
    jest.isolateModules(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      OtherProcessClient = (require('../../libs/sdk/src') as typeof import('../../libs/sdk/src')).PaymentGatewayClient;
    });
    expect(OtherProcessClient).not.toBe(PaymentGatewayClient);
    const accountId = await gw.operator.createAccount();
    const r = await gw.operator.http.post('/admin/v1/projects', { accountId, name: 'Два процесса' });
    expectStatus(r, 201);
    // One clock for both, read at the gateway's time; a wait moves it on (no real wait).
    let ms = (await gw.operator.advance(0)).getTime();
    const ahead: string[] = [];
    const options = {
      baseUrl: `${gw.baseUrl}/v1`,
      auth: { publicId: r.body.keys.test.publicKey as string, signingSecret: r.body.webhookSecret as string },
      now: () => ms,
      sleep: async (wait: number) => {
        ms += wait;
      },
      fetch: (input: string | URL | Request, init?: RequestInit) => {
        const t = Number((init?.headers as Record<string, string>)['x-timestamp']);
        if (t > Math.floor(ms / 1000)) ahead.push(`${t} at ${ms}`);
        return fetch(input, init);
      },
    };
    const first = new PaymentGatewayClient(options);
    for (let i = 0; i < 30; i++) await first.getBalance();
    expect(ahead).toEqual([]);
    // The first process has exited; the next one, started on the same key, is accepted at its first call.
    const second = new OtherProcessClient(options);
    expect(await second.getBalance()).toMatchObject({ currency: 'RUB' });
    expect(ahead).toEqual([]);
  });

  it('createInvoiceWithOutcome tells a new invoice (201) from the one its orderId already has (200) and from a key replay', async () => {
    const id = orderId();
    const first = await bearer.createInvoiceWithOutcome({ amount: '1500.00', orderId: id, method: 'sbp' });
    expect(first).toMatchObject({ created: true, attempts: 1, invoice: { status: 'created', amount: '1500.00' } });
    const again = await bearer.createInvoiceWithOutcome({ amount: '1500.00', orderId: id, method: 'sbp' });
    expect(again).toEqual({ created: false, attempts: 1, invoice: first.invoice });
    // createInvoice answers the invoice alone, as before.
    expect(await bearer.createInvoice({ amount: '1500.00', orderId: id, method: 'sbp' })).toEqual(first.invoice);

    // Under an Idempotency-Key the repeat replays the 201 (Idempotent-Replayed): not made now either.
    const keyed = { amount: '700.00', orderId: orderId(), method: 'card' as const };
    const idempotencyKey = randomUUID();
    expect(await bearer.createInvoiceWithOutcome(keyed, { idempotencyKey })).toMatchObject({ created: true });
    const replayed = await bearer.createInvoiceWithOutcome(keyed, { idempotencyKey });
    expect(replayed.created).toBe(false);
  });

  it("a call's signal cancels the wait before its retry and the request in flight; a refund's error names the key of every attempt", async () => {
    const accountId = await gw.operator.createAccount();
    const project = await gw.operator.createProject(accountId, { holdHours: 0 });
    const secretKey = project.keys.test.secretKey;
    const statuses: number[] = [];
    let onAnswer = (_status: number) => {};
    const direct = new PaymentGatewayClient({
      baseUrl: `${gw.baseUrl}/v1`,
      auth: { secretKey },
      fetch: async (input, init) => {
        const r = await fetch(input, init);
        statuses.push(r.status);
        onAnswer(r.status);
        return r;
      },
    });
    const created = await direct.createInvoice({ amount: '1000.00', orderId: orderId(), method: 'sbp' });

    // A second poll within 3 s is 429 with Retry-After: the signal, aborted then, ends the wait; nothing more is sent.
    await direct.getInvoice(created.id);
    const polling = new AbortController();
    onAnswer = (status) => {
      if (status === 429) setImmediate(() => polling.abort());
    };
    statuses.length = 0;
    const cancelled = await direct.getInvoice(created.id, { signal: polling.signal }).catch((e: unknown) => e);
    onAnswer = () => {};
    expect(cancelled).toBeInstanceOf(PaymentGatewayAbortError);
    expect(cancelled).toMatchObject({ name: 'AbortError', request: 'GET /invoices/{id}'.replace('{id}', created.id), attempts: 1 });
    expect((cancelled as Error).cause).toBe(polling.signal.reason);
    expect(statuses).toEqual([429]);
    // A signal aborted already: nothing is sent.
    statuses.length = 0;
    await expect(direct.getBalance({ signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError', attempts: 0 });
    expect(statuses).toEqual([]);

    // A refund through a proxy that drops the gateway's first answer and holds the second: aborted while the second is held.
    expectStatus(await gw.operator.payment(created.id, 'paid'), 200);
    await poll(
      () => direct.getBalance(),
      (b) => b.available !== '0.00',
      'the paid amount to be available',
    );
    const { answered, port, close } = await answerLosingProxy(gw.baseUrl, (n) => n === 1);
    try {
      // One retry, each attempt at most 10 s: a call that ignored its signal would end in seconds, not hang the test.
      const lossy = new PaymentGatewayClient({ baseUrl: `http://127.0.0.1:${port}/v1`, auth: { secretKey }, maxRetries: 1, timeoutMs: 10_000 });
      const refunding = new AbortController();
      const pending = lossy.refundInvoice(created.id, { amount: '100.00' }, { signal: refunding.signal }).catch((e: unknown) => e);
      await poll(
        async () => answered.length,
        (n) => n === 2,
        'the gateway to answer both attempts',
      );
      refunding.abort();
      const failure = await pending;
      expect(failure).toBeInstanceOf(PaymentGatewayAbortError);
      const { idempotencyKey, attempts, message, name } = failure as PaymentGatewayAbortError;
      expect({ name, attempts }).toEqual({ name: 'AbortError', attempts: 2 });
      expect(answered.map((a) => [a.status, a.key])).toEqual([
        [202, idempotencyKey],
        [202, idempotencyKey],
      ]);
      expect(message).toContain(`the gateway may have acted. Make the same call with the same Idempotency-Key ${idempotencyKey}`);
      // Repeated with the key: the refund the aborted call made, not a new one.
      const repeated = await direct.refundInvoiceWithOutcome(created.id, { amount: '100.00' }, { idempotencyKey });
      expect(repeated).toMatchObject({ created: false, refund: { id: answered[0].body.id, amount: '100.00' } });
      expect(answered[1].body.id).toBe(answered[0].body.id);
    } finally {
      await close();
    }
  });

  it('HMAC mode: a wrong secret costs one failed authentication per call; a second another process took is still signed again', async () => {
    const failures = async (): Promise<number> => {
      const text = await (await fetch(`${gw.baseUrl}/metrics`, { headers: { authorization: `Bearer ${gw.gateway.adminToken}` } })).text();
      const line = text.split('\n').find((l) => l.startsWith('auth_failures_total{kind="signature"}'));
      return line === undefined ? 0 : Number(line.split(' ').pop());
    };
    const accountId = await gw.operator.createAccount();
    const r = await gw.operator.http.post('/admin/v1/projects', { accountId, name: 'Чужой секрет' });
    expectStatus(r, 201);
    const publicId: string = r.body.keys.test.publicKey;
    const sent: string[] = [];
    const counting = (input: string | URL | Request, init?: RequestInit) => {
      sent.push(String((init?.headers as Record<string, string>)['x-timestamp']));
      return fetch(input, init);
    };
    const before = await failures();
    const wrong = new PaymentGatewayClient({ baseUrl: `${gw.baseUrl}/v1`, auth: { publicId, signingSecret: `${r.body.webhookSecret}x` }, fetch: counting });
    const failure = await wrong.getBalance().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(PaymentGatewayError);
    expect(failure).toMatchObject({ status: 401, code: 'signature_invalid', param: 'X-Signature', attempts: 1 });
    expect(sent).toHaveLength(1);
    expect(await failures()).toBe(before + 1);

    // Two processes of the right secret on one clock: the second's first signature is the first's (param X-Timestamp),
    // signed again in the next second and accepted; a replay is no failed authentication.
    let OtherProcessClient!: typeof PaymentGatewayClient;
    jest.isolateModules(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      OtherProcessClient = (require('../../libs/sdk/src') as typeof import('../../libs/sdk/src')).PaymentGatewayClient;
    });
    let ms = (await gw.operator.advance(0)).getTime();
    const options = {
      baseUrl: `${gw.baseUrl}/v1`,
      auth: { publicId, signingSecret: r.body.webhookSecret as string },
      now: () => ms,
      sleep: async (wait: number) => {
        ms += wait;
      },
      fetch: counting,
    };
    sent.length = 0;
    expect(await new PaymentGatewayClient(options).getBalance()).toMatchObject({ currency: 'RUB' });
    expect(await new OtherProcessClient(options).getBalance()).toMatchObject({ currency: 'RUB' });
    const second = Math.floor(ms / 1000) - 1;
    expect(sent).toEqual([second, second, second + 1].map(String));
    expect(await failures()).toBe(before + 1);
  });

  // Last: it moves the gateway clock two hours ahead of the system clock.
  it('HMAC mode with a clock two hours off: 401 timestamp_invalid carries X-Server-Time, the SDK corrects and is accepted', async () => {
    const now = await gw.operator.advance(7200);
    const gatewaySeconds = Math.floor(now.getTime() / 1000);
    // The raw refusal: X-Server-Time is the gateway clock (the Date header is the system clock).
    const refused = await sendSigned(gw.baseUrl, { method: 'GET', path: '/v1/balance', publicId: shop.keys.test.publicKey, secret: shop.secret });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('timestamp_invalid');
    const stated = Number(refused.headers.get('x-server-time'));
    expect(stated).toBeGreaterThanOrEqual(gatewaySeconds);
    expect(stated).toBeLessThanOrEqual(Math.floor((await gw.operator.advance(0)).getTime() / 1000));

    const client = new PaymentGatewayClient({ baseUrl: `${gw.baseUrl}/v1`, auth: { publicId: shop.keys.test.publicKey, signingSecret: shop.secret } });
    expect(await client.getBalance()).toMatchObject({ currency: 'RUB' });
    expect(Math.abs(client.clockOffsetSeconds - 7200)).toBeLessThanOrEqual(2);
    // Learnt once: the next request is accepted at the first attempt.
    const created = await client.createInvoice({ amount: '100.00', orderId: orderId() });
    expect(created.status).toBe('created');
  });
});

const idOf = (w: ReceivedWebhook): unknown => {
  const d: Json = w.body?.data ?? {};
  return d.refund?.id ?? d.payout?.id ?? d.invoice?.id;
};

async function arrival(receiver: WebhookReceiver, kind: string, resourceId: unknown): Promise<ReceivedWebhook> {
  const matches = (w: ReceivedWebhook) => w.headers['x-service-event'] === kind && idOf(w) === resourceId;
  await receiver.waitFor((all) => all.some(matches), `${kind} of ${String(resourceId)}`);
  return receiver.received.find(matches)!;
}

/**
 * A proxy that passes each request to the gateway and records its answer (status, the
 * Idempotency-Key sent, body), then drops the connection when `lose(answers so far)`,
 * else holds it unanswered: the client never hears what the gateway did.
 */
async function answerLosingProxy(target: string, lose: (answered: number) => boolean): Promise<{ answered: Json[]; port: number; close(): Promise<void> }> {
  const answered: Json[] = [];
  const proxy = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const forwarded = ['authorization', 'content-type', 'idempotency-key'].flatMap((name) => (req.headers[name] ? [[name, String(req.headers[name])]] : []));
      void fetch(`${target}${req.url}`, { method: req.method, headers: Object.fromEntries(forwarded), body: Buffer.concat(chunks) })
        .then(async (upstream) => answered.push({ status: upstream.status, key: req.headers['idempotency-key'], body: await upstream.json() }))
        .finally(() => {
          if (lose(answered.length)) res.destroy();
        });
    });
  });
  return listening(proxy, answered);
}

/**
 * A proxy that passes each request to the gateway and records its answer (status, the
 * Idempotency-Key sent, body), then answers the n-th request (from 0) with an nginx-style
 * HTML page of the status `page(n)` when it gives one, else with the gateway's answer.
 */
async function pageAnsweringProxy(
  target: string,
  page: (n: number) => number | undefined,
): Promise<{ answered: Json[]; port: number; close(): Promise<void> }> {
  const answered: Json[] = [];
  const proxy = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const forwarded = ['authorization', 'content-type', 'idempotency-key'].flatMap((name) => (req.headers[name] ? [[name, String(req.headers[name])]] : []));
      void fetch(`${target}${req.url}`, { method: req.method, headers: Object.fromEntries(forwarded), body: Buffer.concat(chunks) }).then(async (upstream) => {
        const text = await upstream.text();
        const status = page(answered.length);
        answered.push({ status: upstream.status, key: req.headers['idempotency-key'], body: JSON.parse(text) });
        if (status !== undefined) {
          res
            .writeHead(status, { 'content-type': 'text/html' })
            .end(`<html><head><title>${status}</title></head><body><center><h1>${status}</h1></center><hr><center>nginx</center></body></html>`);
        } else {
          const replayed = upstream.headers.get('idempotent-replayed');
          res.writeHead(upstream.status, { 'content-type': 'application/json', ...(replayed ? { 'idempotent-replayed': replayed } : {}) }).end(text);
        }
      });
    });
  });
  return listening(proxy, answered);
}

/** The proxy listening on a free local port, with what it recorded and how to close it. */
async function listening(proxy: http.Server, answered: Json[]): Promise<{ answered: Json[]; port: number; close(): Promise<void> }> {
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    answered,
    port: (proxy.address() as AddressInfo).port,
    close: async () => {
      proxy.closeAllConnections();
      await new Promise((resolve) => proxy.close(resolve));
    },
  };
}
