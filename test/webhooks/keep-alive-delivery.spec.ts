/**
 * Webhook delivery over pooled keep-alive connections, at real local receivers:
 * connections are reused (counted at the receiver), at most `perUrlConcurrency`
 * attempts are at one URL at once however many connections the pool holds (counted
 * as concurrent requests at the receiver), and the address guard holds with pooling:
 * an attempt to a host name that now resolves to a refused address is refused even
 * though a connection opened when the name resolved to an allowed one is still in the
 * pool, and a new connection is only made to an address checked by the lookup that
 * connection uses.
 *
 * The guard's own rules (which addresses are refused) are tested in
 * webhook-address.spec.ts and, end to end, in webhooks.spec.ts. Here the receivers
 * are on loopback, so the guard tests give the client a rule of their own:
 * 127.0.0.1 stands for an allowed (public) address and 127.0.0.2 for a refused one,
 * and a resolver the test answers stands for DNS.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SystemClock } from '#platform/clock';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { Registry, UnopenableWebhookSecretError } from '#payments/merchants';
import { ResolveAll, WebhookDispatcher, WebhookHttpClient } from '#payments/webhooks';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { webhookProject } from '../support/webhook-project';
import { queued } from '../support/webhook-queue';
import { poll } from '../support/merchant-fixtures';

/** A receiver that counts connections, requests, and requests being answered at once; answers 200 after `delayMs` (never when negative). */
interface CountingReceiver {
  readonly url: string;
  readonly port: number;
  connections: number;
  requests: number;
  inFlight: number;
  maxInFlight: number;
  close(): Promise<void>;
}

async function countingReceiver(host = '127.0.0.1', delayMs = 0, port = 0): Promise<CountingReceiver> {
  const receiver = { url: '', port: 0, connections: 0, requests: 0, inFlight: 0, maxInFlight: 0, close: async () => undefined } as CountingReceiver;
  const server = http.createServer((req, res) => {
    receiver.requests++;
    receiver.inFlight++;
    receiver.maxInFlight = Math.max(receiver.maxInFlight, receiver.inFlight);
    req.resume();
    req.on('end', () => {
      if (delayMs < 0) return;
      setTimeout(() => {
        receiver.inFlight--;
        res.writeHead(200).end('ok');
      }, delayMs);
    });
  });
  server.on('connection', () => receiver.connections++);
  return Object.assign(receiver, await listening(server, host, port));
}

/** `server` listening on host:port (0: any free one): its /hooks URL, its port, and a close that drops every connection. */
async function listening(server: http.Server, host = '127.0.0.1', port = 0): Promise<{ url: string; port: number; close(): Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `http://${host}:${address.port}/hooks`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('the webhook dispatcher over keep-alive connections (real PostgreSQL, real receivers)', () => {
  let db: TestDatabase;
  let registry: Registry;
  let projectId: string;
  const clock = new SystemClock();

  beforeAll(async () => {
    db = await createTestDatabase();
    registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
    const project = await webhookProject(registry, clock.now());
    projectId = project.id;
  });
  afterAll(async () => {
    await db.drop();
  });

  async function enqueue(url: string, count: number): Promise<void> {
    await db.pool.query(
      queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
       SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, $2, '{"type":"invoice.paid"}', true, 'pending', $4, $4 FROM generate_series(1, $3)`),
      [projectId, url, count, clock.now()],
    );
  }

  const delivered = async (url: string): Promise<number> =>
    Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE url = $1 AND status = 'delivered'`, [url])).rows[0]!.n);

  async function deliverAll(dispatcher: WebhookDispatcher, urls: readonly string[], total: number): Promise<void> {
    dispatcher.start();
    const deadline = Date.now() + 60_000;
    for (;;) {
      let done = 0;
      for (const url of urls) done += await delivered(url);
      if (done === total) break;
      if (Date.now() > deadline) throw new Error(`${done} of ${total} delivered: not in time`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await dispatcher.stop();
  }

  // A dispatcher whose key file is stale (a key rotation not copied to it) recorded a failed attempt per claim: every
  // delivery spent its 7 attempts and the merchant's healthy endpoint was disabled after 3 days.
  it('a delivery it cannot sign (the secret does not open with its key) is not attempted nor charged; one that can sends it', async () => {
    const receiver = await countingReceiver();
    try {
      await enqueue(receiver.url, 3);
      const stale = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
      const errors: Error[] = [];
      const options = { concurrency: 4, allowPrivateNetworks: true };
      const unsigned = new WebhookDispatcher(db.pool, stale, clock, options);
      unsigned.onError = (error) => errors.push(error);
      unsigned.start();
      try {
        await poll(
          async () => errors.length,
          (n) => n >= 3,
          'every delivery claimed and not signed',
        );
        // Its URL left out of this dispatcher's claims: not claimed again and again while the others could send them.
        await new Promise((resolve) => setTimeout(resolve, 500));
      } finally {
        await unsigned.stop();
      }
      expect(errors).toHaveLength(3);
      expect(errors[0]).toBeInstanceOf(UnopenableWebhookSecretError);
      // Each given back at once (no lease kept for its 15 s).
      const leased = await db.pool.query('SELECT count(*)::int AS n FROM webhook_queue WHERE url = $1 AND lease_token IS NOT NULL', [receiver.url]);
      expect(leased.rows[0]).toEqual({ n: 0 });
      const charged = await db.pool.query(
        `SELECT d.attempts_made, (SELECT count(*)::int FROM webhook_attempts a WHERE a.delivery_id = d.id) AS recorded
           FROM webhook_deliveries d WHERE d.url = $1`,
        [receiver.url],
      );
      expect(charged.rows).toEqual(Array.from({ length: 3 }, () => ({ attempts_made: 0, recorded: 0 })));
      expect(receiver.requests).toBe(0);
      await deliverAll(new WebhookDispatcher(db.pool, registry, clock, options), [receiver.url], 3);
      expect(receiver.requests).toBe(3);
    } finally {
      await receiver.close();
    }
  });

  it('reuses its connections: 300 deliveries to one receiver over a handful of connections', async () => {
    const receiver = await countingReceiver();
    try {
      await enqueue(receiver.url, 300);
      const dispatcher = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 32, perUrlConcurrency: 8, allowPrivateNetworks: true });
      await deliverAll(dispatcher, [receiver.url], 300);
      expect(receiver.requests).toBe(300);
      // Without keep-alive each attempt opened its own connection (300).
      expect(receiver.connections).toBeGreaterThan(0);
      // At most one per attempt in flight to the URL.
      expect(receiver.connections).toBeLessThanOrEqual(8);
    } finally {
      await receiver.close();
    }
  });

  it('a busy URL’s backlog does not hold back another URL’s webhooks due after it', async () => {
    const busy = await countingReceiver('127.0.0.1', 2);
    const other = await countingReceiver();
    try {
      await enqueue(busy.url, 3000);
      const dispatcher = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 32, perUrlConcurrency: 8, allowPrivateNetworks: true });
      dispatcher.start();
      try {
        const deadline = Date.now() + 30_000;
        while (busy.requests < 100) {
          if (Date.now() > deadline) throw new Error('the busy URL did not get going');
          await new Promise((r) => setTimeout(r, 10));
        }
        // Due after all of the busy URL's 3,000.
        await enqueue(other.url, 5);
        while ((await delivered(other.url)) < 5) {
          if (Date.now() > deadline) throw new Error('the other URL was not delivered');
          await new Promise((r) => setTimeout(r, 10));
        }
        // Delivered while most of the busy URL's backlog was still waiting (8 at a time, 2 ms each: at most 4,000/s).
        expect(busy.requests).toBeLessThan(2000);
      } finally {
        await dispatcher.stop();
      }
    } finally {
      await busy.close();
      await other.close();
      // The rest of the backlog would only meet a closed receiver in the next tests.
      await db.pool.query('DELETE FROM webhook_attempts a USING webhook_deliveries d WHERE d.id = a.delivery_id AND d.url = $1', [busy.url]);
      await db.pool.query('DELETE FROM webhook_queue WHERE url = $1', [busy.url]);
      await db.pool.query('DELETE FROM webhook_deliveries WHERE url = $1', [busy.url]);
    }
  });

  it('holds the per-URL cap with pooling: at most 8 requests at once at each receiver, both used in parallel', async () => {
    const slowA = await countingReceiver('127.0.0.1', 30);
    const slowB = await countingReceiver('127.0.0.1', 30);
    try {
      await enqueue(slowA.url, 60);
      await enqueue(slowB.url, 60);
      const dispatcher = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 32, perUrlConcurrency: 8, allowPrivateNetworks: true });
      await deliverAll(dispatcher, [slowA.url, slowB.url], 120);
      expect([slowA.requests, slowB.requests]).toEqual([60, 60]);
      // Each receiver saw the cap reached and never passed.
      expect([slowA.maxInFlight, slowB.maxInFlight]).toEqual([8, 8]);
    } finally {
      await slowA.close();
      await slowB.close();
    }
  });

  // A receiver that closes idle keep-alive connections (closingReceiver, below).
  it('every delivery succeeds at its first attempt: a request met by the close of its reused connection before any reply byte is sent again on a new one', async () => {
    const receiver = await closingReceiver();
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 4, perUrlConcurrency: 2, allowPrivateNetworks: true });
    try {
      await enqueue(receiver.url, 30);
      dispatcher.start();
      const deadline = Date.now() + 30_000;
      const settled = async () =>
        (
          await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE url = $1 AND (status <> 'pending' OR attempts_made > 0)`, [
            receiver.url,
          ])
        ).rows[0]!.n;
      while ((await settled()) !== '30') {
        if (Date.now() > deadline) throw new Error('the deliveries were not attempted in time');
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await dispatcher.stop();
      await receiver.close();
    }
    const rows = await db.pool.query<{ status: string; attempts: string; codes: (number | null)[] }>(
      `SELECT d.status, count(a.*) AS attempts, array_agg(a.status_code) AS codes
         FROM webhook_deliveries d LEFT JOIN webhook_attempts a ON a.delivery_id = d.id WHERE d.url = $1 GROUP BY d.id`,
      [receiver.url],
    );
    expect(rows.rows).toHaveLength(30);
    expect(rows.rows.filter((r) => !(r.status === 'delivered' && r.attempts === '1' && r.codes[0] === 200))).toEqual([]);
    // The closes happened (each then answered on a new connection).
    expect(receiver.closed).toBeGreaterThan(0);
    expect(receiver.requests).toBe(30 + receiver.closed);
  });

  it('sends again only once, only after a reused connection closed, and never after a reply byte', async () => {
    const receiver = await closingReceiver();
    const client = new WebhookHttpClient({ allowPrivateNetworks: true });
    const post = () => client.post(receiver.url, '{}', {});
    try {
      // A new connection closed before any reply: the attempt fails, sent once.
      receiver.mode = 'close-all';
      expect(await post()).toMatchObject({ statusCode: null, body: null, error: expect.any(String) });
      expect(receiver.requests).toBe(1);

      // A reused connection closed, then the new one too: sent twice, no more.
      receiver.mode = 'first-only';
      receiver.requests = 0;
      expect(await post()).toMatchObject({ statusCode: 200, error: null });
      expect(await post()).toMatchObject({ statusCode: null, error: expect.any(String) });
      expect(receiver.requests).toBe(3);
    } finally {
      await client.close();
    }
    const other = new WebhookHttpClient({ allowPrivateNetworks: true });
    try {
      // Part of a reply came on the reused connection before it closed: not sent again.
      receiver.mode = 'partial';
      receiver.requests = 0;
      expect(await other.post(receiver.url, '{}', {})).toMatchObject({ statusCode: 200, error: null });
      expect(await other.post(receiver.url, '{}', {})).toMatchObject({ statusCode: null, error: expect.any(String) });
      expect(receiver.requests).toBe(2);
    } finally {
      await other.close();
      await receiver.close();
    }
  });
});

describe('receivers that hang, with deliveries claimed ahead', () => {
  let db: TestDatabase;
  let registry: Registry;
  let projectId: string;
  const clock = new SystemClock();

  beforeAll(async () => {
    db = await createTestDatabase();
    registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
    const project = await webhookProject(registry, clock.now());
    projectId = project.id;
  });
  afterAll(async () => {
    await db.drop();
  });

  // Five of them at 8 slots each would hold all 32 and keep the other URL waiting for
  // the reply timeout (60 s here): each holds one slot, since none has answered yet.
  it('five receivers that never answer hold one slot each; another URL’s webhooks still go out, and nothing hanging is recorded as answered', async () => {
    const hanging = await Promise.all([1, 2, 3, 4, 5].map(() => countingReceiver('127.0.0.1', -1)));
    const healthy = await countingReceiver();
    const enqueue = (url: string, count: number) =>
      db.pool.query(
        queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
         SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, $2, '{}', true, 'pending', $4, $4 FROM generate_series(1, $3)`),
        [projectId, url, count, clock.now()],
      );
    for (const r of hanging) await enqueue(r.url, 100);
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, {
      concurrency: 32,
      perUrlConcurrency: 8,
      allowPrivateNetworks: true,
      timeoutMs: 60_000,
    });
    try {
      dispatcher.start();
      const deadline = Date.now() + 15_000;
      while (hanging.some((r) => r.requests < 1)) {
        if (Date.now() > deadline) throw new Error('the hanging receivers did not get their first attempts');
        await new Promise((r) => setTimeout(r, 20));
      }
      // Only now the other URL's deliveries become due.
      await enqueue(healthy.url, 20);
      while (healthy.requests < 20) {
        if (Date.now() > deadline) throw new Error(`${healthy.requests} of 20 healthy deliveries sent`);
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(hanging.map((r) => [r.requests, r.maxInFlight])).toEqual([
        [1, 1],
        [1, 1],
        [1, 1],
        [1, 1],
        [1, 1],
      ]);
    } finally {
      // The hanging attempts fail when their receivers go away; then the dispatcher can stop.
      for (const r of hanging) await r.close();
      await dispatcher.stop();
      await healthy.close();
    }
    const answered = await db.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.url = ANY($1) AND a.status_code IS NOT NULL`,
      [hanging.map((r) => r.url)],
    );
    expect(answered.rows[0]!.n).toBe('0');
  });
});

describe('the address guard with pooled connections (a rule and a resolver of the test)', () => {
  let allowed: CountingReceiver;
  let refused: CountingReceiver;
  /** What the test's DNS answers for shop.test. */
  let answer: string[] = [];
  let lookups = 0;
  const resolveAll: ResolveAll = (hostname, callback) => {
    lookups++;
    if (hostname !== 'shop.test') return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
    const next = answer.length > 1 ? answer.shift()! : answer[0]!;
    callback(null, [{ address: next, family: 4 }]);
  };
  const rule = (address: string) => (address === '127.0.0.1' ? null : 'is not a globally routable address (test rule)');

  beforeAll(async () => {
    allowed = await countingReceiver('127.0.0.1');
    // The same port on another loopback address: where the name leads once it resolves there.
    refused = await countingReceiver('127.0.0.2', 0, allowed.port);
  });
  afterAll(async () => {
    await allowed.close();
    await refused.close();
  });

  const url = () => `http://shop.test:${allowed.port}/hooks`;
  const post = (client: WebhookHttpClient) => client.post(url(), JSON.stringify({ id: randomUUID() }), { 'x-service-event': 'invoice.paid' });

  it('a name that now resolves to a refused address gets nothing, though a connection opened to its allowed address is still pooled; back to the allowed address, that connection is reused', async () => {
    const client = new WebhookHttpClient({ allowPrivateNetworks: false, resolveAll, addressRefusal: rule });
    try {
      answer = ['127.0.0.1'];
      expect(await post(client)).toMatchObject({ statusCode: 200, body: 'ok', error: null });
      expect(await post(client)).toMatchObject({ statusCode: 200 });
      expect([allowed.requests, allowed.connections, client.connectionsOpened]).toEqual([2, 1, 1]);

      answer = ['127.0.0.2'];
      const refusedAttempt = await post(client);
      expect(refusedAttempt).toMatchObject({ statusCode: null, body: null });
      expect(refusedAttempt.error).toBe('refused: shop.test resolves to 127.0.0.2, which is not a globally routable address (test rule)');
      // Not sent over the pooled connection, nor anywhere else.
      expect([allowed.requests, refused.requests, refused.connections]).toEqual([2, 0, 0]);

      answer = ['127.0.0.1'];
      expect(await post(client)).toMatchObject({ statusCode: 200 });
      expect([allowed.requests, allowed.connections, client.connectionsOpened]).toEqual([3, 1, 1]);
    } finally {
      await client.close();
    }
  });

  it('a new connection is made only to an address its own lookup checked: a name that answers an allowed address to the attempt’s check and a refused one to the connection gets nothing', async () => {
    const client = new WebhookHttpClient({ allowPrivateNetworks: false, resolveAll, addressRefusal: rule });
    try {
      const before = { requests: refused.requests, connections: refused.connections };
      lookups = 0;
      // The first lookup (the attempt's check) answers 127.0.0.1, the next (the connection's) 127.0.0.2.
      answer = ['127.0.0.1', '127.0.0.2'];
      const attempt = await post(client);
      expect(lookups).toBe(2);
      expect(attempt).toMatchObject({ statusCode: null, body: null });
      expect(attempt.error).toMatch(/refused: shop\.test resolves to 127\.0\.0\.2, which is not a globally routable address \(test rule\)/);
      expect({ requests: refused.requests, connections: refused.connections }).toEqual(before);
      expect(client.connectionsOpened).toBe(0);
    } finally {
      await client.close();
    }
  });

  // The check's lookup ran before the attempt's timer: a name server that did not answer stretched the attempt past its
  // 15 s lease, and the delivery was claimed and sent again after the receiver had answered 2xx.
  it('a name that takes longer than the attempt’s limit to resolve ends the attempt at that limit: nothing is sent', async () => {
    let resolved = 0;
    const slowResolve: ResolveAll = (hostname, callback) =>
      setTimeout(() => {
        resolved++;
        resolveAll(hostname, callback);
      }, 1_500);
    const client = new WebhookHttpClient({ allowPrivateNetworks: false, resolveAll: slowResolve, addressRefusal: rule, timeoutMs: 500 });
    try {
      answer = ['127.0.0.1'];
      const before = allowed.requests;
      const attempt = await post(client);
      expect(attempt).toMatchObject({ statusCode: null, body: null, error: 'no reply within 0.5 s (the host name did not resolve in time)' });
      // Ended before the name resolved; once it has, nothing is sent for that attempt.
      expect(resolved).toBe(0);
      await poll(
        async () => resolved,
        (n) => n === 1,
        'the slow lookup answered',
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(allowed.requests).toBe(before);
    } finally {
      await client.close();
    }
  });

  it('the lookup counts in the limit: a reply that comes within it after the request but past it after the lookup is no reply', async () => {
    const slowReceiver = await countingReceiver('127.0.0.1', 400);
    let lookups = 0;
    const slowResolve: ResolveAll = (hostname, callback) => {
      lookups++;
      setTimeout(() => resolveAll(hostname, callback), 300);
    };
    const client = new WebhookHttpClient({ allowPrivateNetworks: false, resolveAll: slowResolve, addressRefusal: rule, timeoutMs: 600 });
    try {
      answer = ['127.0.0.1'];
      const posting = Promise.all([1, 2, 3].map(() => client.post(`http://shop.test:${slowReceiver.port}/hooks`, '{}', { 'x-service-event': 'invoice.paid' })));
      // The three checks at once share one lookup of the name (a dead name server holds one lookup thread, not three).
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(lookups).toBe(1);
      const attempts = await posting;
      // 300 ms to resolve and 400 ms to answer: past 600 ms, not the 1 s a fresh timer after the lookup would allow.
      expect(attempts.map((a) => a.error)).toEqual(['no reply within 0.6 s', 'no reply within 0.6 s', 'no reply within 0.6 s']);
    } finally {
      await client.close();
      await slowReceiver.close();
    }
  });

  it('an IP literal is checked before connecting; with WEBHOOK_ALLOW_PRIVATE_NETWORKS nothing is refused', async () => {
    const guarded = new WebhookHttpClient({ allowPrivateNetworks: false, resolveAll, addressRefusal: rule });
    const open = new WebhookHttpClient({ allowPrivateNetworks: true, resolveAll });
    try {
      const before = refused.connections;
      const attempt = await guarded.post(`http://127.0.0.2:${allowed.port}/hooks`, '{}', {});
      expect(attempt).toMatchObject({ statusCode: null, body: null, error: 'refused: 127.0.0.2 is not a globally routable address (test rule)' });
      expect(refused.connections).toBe(before);
      expect(await open.post(`http://127.0.0.2:${allowed.port}/hooks`, '{}', {})).toMatchObject({ statusCode: 200 });
      expect(refused.connections).toBe(before + 1);
    } finally {
      await guarded.close();
      await open.close();
    }
  });

  it('a status received in time is the answer though its body has not ended; no status in time is no reply', async () => {
    // 300 ms in place of the 10 s limit, so that the test does not wait 10 s for each case.
    const client = new WebhookHttpClient({ allowPrivateNetworks: true, timeoutMs: 300 });
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.url === '/slow-body') {
          res.writeHead(200);
          res.write('accepted');
          setTimeout(() => res.end('.'), 1_000);
        } else setTimeout(() => res.writeHead(200).end('late'), 1_000);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      expect(await client.post(`${base}/slow-body`, '{}', {})).toMatchObject({
        statusCode: 200,
        body: 'accepted',
        error: "the reply's body did not end within 0.3 s",
      });
      expect(await client.post(`${base}/slow-status`, '{}', {})).toMatchObject({ statusCode: null, body: null, error: 'no reply within 0.3 s' });
    } finally {
      await client.close();
      server.closeAllConnections();
      server.close();
    }
  });

  it('a URL is parsed once and kept, its host still judged at every attempt; an unusable URL is refused every time without a connection', async () => {
    const guarded = new WebhookHttpClient({ allowPrivateNetworks: false, resolveAll, addressRefusal: rule });
    try {
      const url = `http://127.0.0.2:${allowed.port}/hooks?x=1`;
      const before = refused.connections;
      for (let i = 0; i < 3; i++) {
        expect(await guarded.post(url, '{}', {})).toMatchObject({ statusCode: null, error: expect.stringMatching(/^refused: 127\.0\.0\.2 is not/) });
        expect(await guarded.post('not a url', '{}', {})).toMatchObject({ statusCode: null, body: null, error: 'invalid URL' });
        expect(await guarded.post(`ftp://127.0.0.1:${allowed.port}/hooks`, '{}', {})).toMatchObject({
          statusCode: null,
          error: 'only http and https URLs are allowed',
        });
        expect(await guarded.post(`http://127.0.0.1:${allowed.port}/hooks?x=1`, '{}', {})).toMatchObject({ statusCode: 200, error: null });
      }
      expect(refused.connections).toBe(before);
    } finally {
      await guarded.close();
    }
  });
});

/**
 * A receiver that closes keep-alive connections it has left idle, without
 * `Connection: close` (RFC 9112 §9.3.1 allows it at any time). Its close usually meets
 * our next request on the wire; here the meeting is made certain: a later request on a
 * connection that has been answered once is met by the connection's close, before any
 * reply byte (`mode` 'idle-close'). The other modes: 'close-all' closes every
 * connection at its first request; 'first-only' answers the very first request and
 * closes at every later one; 'partial' answers each connection's first request and
 * sends part of a status line before closing at a later one.
 */
async function closingReceiver(): Promise<{ url: string; mode: string; requests: number; closed: number; close(): Promise<void> }> {
  const receiver = { url: '', mode: 'idle-close', requests: 0, closed: 0, close: async () => undefined };
  const answered = new WeakMap<object, number>();
  const server = http.createServer((req, res) => {
    receiver.requests++;
    const before = answered.get(req.socket) ?? 0;
    const drop = receiver.mode === 'close-all' || (receiver.mode === 'first-only' ? receiver.requests > 1 : before > 0);
    if (drop) {
      receiver.closed++;
      if (receiver.mode === 'partial') req.socket.write('HTTP/1.1 2');
      req.socket.destroy();
      return;
    }
    answered.set(req.socket, before + 1);
    req.resume();
    req.on('end', () => res.writeHead(200).end('ok'));
  });
  server.keepAliveTimeout = 0;
  const { url, close } = await listening(server);
  return Object.assign(receiver, { url, close });
}
