/**
 * One address serving many merchants (a shared NAT, an office, a balancer without
 * TRUSTED_PROXIES), with the gateway at the settings `npm start` gives (issue 32):
 * 1,000 failed authentications of each kind, 30 at a time, then 50 merchants' whole
 * flow, the operator's calls and a console login from that same address, with no
 * 429 for anything whose credential holds. Failures are judged exactly (the first 20
 * of the address's window get 401, every later one 429), and what they cost the
 * database is read from the gateway's own metric.
 *
 * Every request of the test comes from 127.0.0.7 (test/support/from-address.ts).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { ClientAt, clientAt, inBatches, AddressedReply } from '../support/from-address';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { CYRILLIC } from '../support/merchant-fixtures';
import { signRequest } from '../support/signing';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-shared-address-tests-0042';
const SHARED = '127.0.0.7';
/** The defaults of AUTH_FAILURE_LIMIT_PER_ADDRESS and of the one-minute window. */
const PER_ADDRESS = 20;
const IN_FLIGHT = 30;
const FAILURES_PER_KIND = 1000;
const MERCHANTS = 50;
/** Keys and public ids that carry a valid tag but were never issued: each costs one lookup, once. */
const FORGED = 10;

interface Keys {
  readonly secretKey: string;
  readonly publicKey: string;
}
interface Shop {
  readonly accountId: string;
  readonly projectId: string;
  readonly webhookSecret: string;
  readonly keys: { readonly test: Keys; readonly live: Keys };
}

/** A token as the gateway issues them (key-tags.ts), tagged with the database's own tag key. */
function forged(prefix: string, randomLength: number, tagKey: Buffer): string {
  const random = randomBytes(randomLength);
  const tag = createHmac('sha256', tagKey).update(prefix).update(random).digest().subarray(0, 6);
  return `${prefix}${Buffer.concat([random, tag]).toString('base64url')}`;
}

describe('a client serving many merchants from one address, at the default settings', () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  let client: ClientAt;
  const shops: Shop[] = [];
  const revoked: Keys[] = [];

  const send = async (method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<AddressedReply> =>
    client.request(method, path, {
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const operator = (method: string, path: string, body?: unknown) => send(method, path, { authorization: `Bearer ${ADMIN_TOKEN}` }, body);
  const bearer = (key: string) => (method: string, path: string, body?: unknown) => send(method, path, { authorization: `Bearer ${key}` }, body);
  const signed = (shop: Shop, mode: 'test' | 'live') => (method: string, path: string, body?: unknown) => {
    const raw = body === undefined ? '' : JSON.stringify(body);
    const timestamp = String(Math.floor(Date.now() / 1000));
    return client.request(method, path, {
      headers: {
        'x-public-id': shop.keys[mode].publicKey,
        'x-timestamp': timestamp,
        'x-signature': signRequest(shop.webhookSecret, timestamp, raw),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : raw,
    });
  };
  const expectOk = (reply: AddressedReply, status: number, what: string) => {
    if (reply.status !== status) throw new Error(`${what}: expected ${status}, got ${reply.status} ${JSON.stringify(reply.body)}`);
  };
  const metric = async (name: string, kind: string): Promise<number> => {
    const text = (await operator('GET', '/metrics')).body as string;
    const line = text.split('\n').find((l) => l.startsWith(`${name}{kind="${kind}"}`));
    if (!line) throw new Error(`no ${name}{kind="${kind}"} in the metrics`);
    return Number(line.split(' ').pop());
  };

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    // The defaults, but for the operator token (a generated one is printed, which the test could read too).
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN });
    client = clientAt(gateway.baseUrl, SHARED);
    for (let i = 0; i < MERCHANTS; i++) {
      const account = await operator('POST', '/admin/v1/accounts', { name: `Магазин ${i}`, email: `shop-${i}@example.com` });
      expectOk(account, 201, 'account');
      const project = await operator('POST', '/admin/v1/projects', { accountId: account.body.id, name: `Проект ${i}`, holdHours: 0 });
      expectOk(project, 201, 'project');
      const address = await operator('POST', `/admin/v1/accounts/${account.body.id}/payout-addresses`, { method: 'sbp', account: '+79161234567' });
      expectOk(address, 201, 'payout address');
      expectOk(await operator('POST', `/admin/v1/payout-addresses/${address.body.id}/confirm`), 200, 'confirm');
      shops.push({ accountId: account.body.id, projectId: project.body.id, webhookSecret: project.body.webhookSecret, keys: project.body.keys });
    }
    // Five more merchants whose test keys were rotated: their old keys are revoked.
    for (let i = 0; i < 5; i++) {
      const account = await operator('POST', '/admin/v1/accounts', { name: `Бывший ${i}`, email: `old-${i}@example.com` });
      const project = await operator('POST', '/admin/v1/projects', { accountId: account.body.id, name: 'Старый проект' });
      expectOk(await operator('POST', `/admin/v1/projects/${project.body.id}/keys/rotate`, { mode: 'test' }), 201, 'rotate');
      revoked.push(project.body.keys.test);
    }
  });
  afterAll(async () => {
    client?.close();
    await gateway?.kill();
    await db?.drop();
  });

  it('1,000 failures of each kind, 30 at a time: exactly 20 answered 401 in the window, the rest 429, and the database asked only about forged keys, once each', async () => {
    const tagKey = (await db.pool.query<{ key: Buffer }>('SELECT key FROM key_tag_key')).rows[0]!.key;
    const forgedSecretKeys = Array.from({ length: FORGED }, () => forged('sk_test_', 18, tagKey));
    const forgedPublicIds = Array.from({ length: FORGED }, () => forged('pk_test_', 12, tagKey));
    const timestamp = () => String(Math.floor(Date.now() / 1000));
    const pick = <T>(items: readonly T[], i: number): T => items[i % items.length]!;

    // Secret keys: random strings, revoked keys, forged ones (each forged key 30 times at once), a malformed header.
    const secretKeyAttempts = Array.from({ length: FAILURES_PER_KIND }, (_, i) => () => {
      const key =
        i % 4 === 0
          ? `sk_test_${randomBytes(24).toString('base64url')}`
          : i % 4 === 1
            ? pick(revoked, i).secretKey
            : pick(forgedSecretKeys, Math.floor(i / 30));
      return send('GET', '/v1/balance', { authorization: i % 50 === 0 ? 'Basic x' : `Bearer ${key}` });
    });
    // Signatures: real merchants' public ids with wrong signatures, revoked and forged public ids, missing timestamps.
    const signatureAttempts = Array.from({ length: FAILURES_PER_KIND }, (_, i) => () => {
      const publicId = i % 3 === 0 ? pick(shops, i).keys.test.publicKey : i % 3 === 1 ? pick(revoked, i).publicKey : pick(forgedPublicIds, Math.floor(i / 30));
      const ts = timestamp();
      return send('GET', '/v1/balance', {
        'x-public-id': publicId,
        ...(i % 10 === 0 ? {} : { 'x-timestamp': ts }),
        'x-signature': signRequest(`whsec_guess_${i}`, ts),
      });
    });
    const operatorAttempts = Array.from(
      { length: FAILURES_PER_KIND },
      (_, i) => () => send('GET', '/admin/v1/webhook-deliveries', { authorization: `Bearer ${randomBytes(24).toString('base64url')}${i}` }),
    );

    const started = Date.now();
    const replies = {
      secret_key: await inBatches(secretKeyAttempts, IN_FLIGHT),
      signature: await inBatches(signatureAttempts, IN_FLIGHT),
      operator_token: await inBatches(operatorAttempts, IN_FLIGHT),
    };
    // One window per started minute of the flood (with the system clock the window may turn during it).
    const windows = Math.floor((Date.now() - started) / 60_000) + 1;

    const all = [...replies.secret_key, ...replies.signature, ...replies.operator_token];
    expect(all.filter((r) => r.status !== 401 && r.status !== 429).map((r) => r.status)).toEqual([]);
    const unauthorized = all.filter((r) => r.status === 401).length;
    if (windows === 1) expect(unauthorized).toBe(PER_ADDRESS);
    else expect(unauthorized).toBeLessThanOrEqual(PER_ADDRESS * windows);
    for (const r of all.filter((x) => x.status === 429)) {
      expect(r.body.error.code).toBe('rate_limited');
      expect(r.body.error.message).toMatch(CYRILLIC);
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(60);
    }

    // What the failures cost the database: one lookup per forged credential, nothing for the rest.
    expect(await metric('auth_failure_lookups_total', 'secret_key')).toBe(FORGED);
    expect(await metric('auth_failure_lookups_total', 'signature')).toBe(FORGED);
    expect(await metric('auth_failure_lookups_total', 'operator_token')).toBe(0);
    // Every failure counted by kind: 401s in auth_failures_total, 429s in auth_failures_refused_total.
    for (const kind of ['secret_key', 'signature', 'operator_token'] as const) {
      expect({
        kind,
        failed: await metric('auth_failures_total', kind),
        refused: await metric('auth_failures_refused_total', kind),
      }).toEqual({
        kind,
        failed: replies[kind].filter((r) => r.status === 401).length,
        refused: replies[kind].filter((r) => r.status === 429).length,
      });
    }
  });

  it('then, from the same address, 50 merchants (Bearer and HMAC) create, read, list, pay, refund and pay out, and the operator works, with no 429', async () => {
    // Still within the flood's window: the address is past its limit for failures.
    expect((await send('GET', '/v1/balance', { authorization: `Bearer sk_test_${randomBytes(24).toString('base64url')}` })).status).toBe(429);

    const statuses: number[] = [];
    const flows = shops.map((shop, i) => async () => {
      // Half the merchants sign their writes (mode 2), half send their secret key. (Reads go with the key: two
      // signed GETs in one second carry the same signature, and the second is a replay.)
      const write = i % 2 === 0 ? bearer(shop.keys.live.secretKey) : signed(shop, 'live');
      const call = (method: string, path: string, body?: unknown) => (method === 'GET' ? bearer(shop.keys.live.secretKey) : write)(method, path, body);
      const step = async (reply: Promise<AddressedReply>, status: number, what: string) => {
        const r = await reply;
        statuses.push(r.status);
        expectOk(r, status, `merchant ${i}: ${what}`);
        return r;
      };
      const created = await step(call('POST', '/v1/invoices', { amount: '1000.00', orderId: `flow-${i}`, method: 'sbp' }), 201, 'create');
      const id = created.body.id as string;
      await step(call('GET', `/v1/invoices/${id}`), 200, 'get');
      // The list is fed asynchronously (GET by id reads its own write; a list may lag by a moment).
      for (let tries = 0; ; tries++) {
        const list = await step(call('GET', '/v1/invoices?limit=5'), 200, 'list');
        if (list.body.items.some((x: { id: string }) => x.id === id)) break;
        if (tries > 200) throw new Error(`merchant ${i}: the invoice never reached the list`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await step(operator('POST', `/admin/v1/invoices/${id}/payment`, { outcome: 'paid' }), 200, 'pay');
      // holdHours 0: the net amount becomes available once the ledger's read model has it.
      for (let tries = 0; ; tries++) {
        const balance = await step(call('GET', '/v1/balance'), 200, 'balance');
        if (balance.body.available !== '0.00') break;
        if (tries > 200) throw new Error(`merchant ${i}: the payment never became available`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const refund = await step(call('POST', `/v1/invoices/${id}/refund`, { amount: '100.00' }), 202, 'refund');
      expect(refund.body.status).toBe('pending');
      const payout = await step(
        call('POST', '/v1/payouts', { amount: '200.00', method: 'sbp', account: '+79161234567', orderId: `payout-${i}` }),
        201,
        'payout',
      );
      expect(payout.body.status).toBe('pending');
      await step(operator('GET', `/admin/v1/accounts/${shop.accountId}/balance?mode=live`), 200, 'operator balance');
    });
    await inBatches(flows, 10);
    expect(statuses.filter((s) => s === 429)).toEqual([]);
    expect(statuses.length).toBeGreaterThanOrEqual(MERCHANTS * 8);

    // The operator's other doors from that address: the metrics, the readiness detail, the console's login.
    expectOk(await operator('GET', '/admin/v1/webhook-deliveries'), 200, 'operator list');
    expectOk(await operator('GET', '/health/ready'), 200, 'readiness detail');
    const login = await client.request('POST', '/admin/login', {
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: ADMIN_TOKEN }).toString(),
    });
    expect(login.status).toBe(303);
    expect(String(login.headers['set-cookie'])).toMatch(/^operator_session=/);
  });
});
