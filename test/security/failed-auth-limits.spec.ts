/**
 * Failed authentication is limited (issue 12, item 3), per API process, on the
 * gateway clock: past 20 failures of one client address in a minute (or past the
 * overall limit, for every address that has failed) requests are answered 429
 * rate_limited with Retry-After before any lookup; a client that authenticates keeps
 * working; no failure counts against a merchant key's request limit; failures and
 * refusals are counted in auth_failures_total / auth_failures_refused_total.
 *
 * Clients are told apart by their address: the test binds them to 127.0.0.2, …
 * (the operator's own calls come from 127.0.0.1, which never fails here).
 */
import { randomBytes } from 'node:crypto';
import type { PoolClient } from 'pg';
import { ClientAt, clientAt, inBatches, AddressedReply } from '../support/from-address';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { CYRILLIC, expectStatus, Merchant, Operator } from '../support/merchant-fixtures';
import { signRequest } from '../support/signing';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-failed-auth-tests-0042';
const PER_ADDRESS = 20;
const OVERALL = 100;
const IN_FLIGHT = 10;

const randomSecretKey = () => `sk_test_${randomBytes(24).toString('base64url')}`;

function expectRefused(reply: AddressedReply): void {
  expect({ status: reply.status, code: reply.body?.error?.code }).toEqual({ status: 429, code: 'rate_limited' });
  expect(reply.body.error.message).toMatch(CYRILLIC);
  const retryAfter = Number(reply.headers['retry-after']);
  expect(String(reply.headers['retry-after'])).toMatch(/^\d+$/);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
}

const statuses = (replies: readonly AddressedReply[]) => replies.map((r) => r.status);
const count = (replies: readonly AddressedReply[], status: number) => replies.filter((r) => r.status === status).length;

describe('failed authentication is limited per client address and overall', () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  let operator: Operator;
  let shop: Merchant;
  const clients: ClientAt[] = [];
  /** 401s and 429s the test saw, per kind: the metrics must say the same. */
  const seen = { failed: { secret_key: 0, signature: 0, operator_token: 0 }, refused: { secret_key: 0, signature: 0, operator_token: 0 } };

  const from = (address: string): ClientAt => {
    const client = clientAt(gateway.baseUrl, address);
    clients.push(client);
    return client;
  };
  const tally = (kind: keyof typeof seen.failed, replies: readonly AddressedReply[]) => {
    seen.failed[kind] += count(replies, 401);
    seen.refused[kind] += count(replies, 429);
  };

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    gateway = await startGateway('gateway', {
      DATABASE_URL: db.url,
      ADMIN_TOKEN,
      CLOCK: 'manual',
      RATE_LIMIT_PER_SECOND: '60',
      AUTH_FAILURE_LIMIT_PER_ADDRESS: String(PER_ADDRESS),
      AUTH_FAILURE_LIMIT_OVERALL: String(OVERALL),
    });
    operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    shop = await operator.merchant({ name: 'Настоящий магазин' });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await gateway?.kill();
    await db?.drop();
  });

  /** A new minute: every window of the previous test is over. */
  beforeEach(async () => {
    await operator.advance(61);
  });

  it('300 random secret keys from one address: 401 until 20 failures, then 429 with Retry-After, answered without a lookup; a merchant on another address keeps working', async () => {
    const attacker = from('127.0.0.2');
    const merchant = from('127.0.0.3');
    const flood = await inBatches(
      Array.from({ length: 300 }, () => () => attacker.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } })),
      IN_FLIGHT,
    );
    tally('secret_key', flood);
    expect(count(flood, 401) + count(flood, 429)).toBe(300);
    // Requests already past the check when the 20th failure was recorded still get their 401 (at most those in flight).
    expect(count(flood, 401)).toBeGreaterThanOrEqual(PER_ADDRESS);
    expect(count(flood, 401)).toBeLessThan(PER_ADDRESS + IN_FLIGHT);
    for (const r of flood.filter((x) => x.status === 401)) expect(r.body.error.code).toBe('unauthorized');
    for (const r of flood.filter((x) => x.status === 429)) expectRefused(r);

    // Refused before any lookup: with the key table locked, a lookup would wait; these are answered at once.
    const locker: PoolClient = await db.pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE');
      const whileLocked = await Promise.all(
        Array.from({ length: 20 }, () => attacker.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } })),
      );
      tally('secret_key', whileLocked);
      for (const r of whileLocked) expectRefused(r);
      // Even the right key from that address: a right guess must look like a wrong one.
      const rightKey = await attacker.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${shop.keys.test.secretKey}` } });
      tally('secret_key', [rightKey]);
      expectRefused(rightKey);
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
    }

    const served = await merchant.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${shop.keys.test.secretKey}` } });
    expect(served.status).toBe(200);
    // A wrong key from the merchant's address is a plain 401: its own count is one.
    const typo = await merchant.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } });
    tally('secret_key', [typo]);
    expect(typo.status).toBe(401);

    // A minute later (on the clock) the attacker's address is heard again.
    await operator.advance(61);
    const later = await attacker.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } });
    tally('secret_key', [later]);
    expect(later.status).toBe(401);
  });

  it("300 bad signatures with a real merchant's public id: 401 then 429; none is counted in the key's request limit, which the merchant still has whole", async () => {
    const attacker = from('127.0.0.4');
    const merchant = from('127.0.0.5');
    const hitsOfKey = async (): Promise<number> => {
      const counted = await db.pool.query<{ hits: string }>(
        'SELECT coalesce(sum(w.hits), 0) AS hits FROM rate_limit_windows w JOIN api_keys k ON k.id = w.key_id WHERE k.public_key = $1',
        [shop.keys.test.publicKey],
      );
      return Number(counted.rows[0]!.hits);
    };
    const hitsBefore = await hitsOfKey();
    const timestamp = String(Math.floor((await operator.advance(0)).getTime() / 1000));
    const flood = await inBatches(
      Array.from(
        { length: 300 },
        (_, i) => () =>
          attacker.request('GET', '/v1/balance', {
            headers: { 'x-public-id': shop.keys.test.publicKey, 'x-timestamp': timestamp, 'x-signature': signRequest(`whsec_guess_${i}`, timestamp) },
          }),
      ),
      IN_FLIGHT,
    );
    tally('signature', flood);
    expect(count(flood, 401)).toBeGreaterThanOrEqual(PER_ADDRESS);
    expect(count(flood, 401)).toBeLessThan(PER_ADDRESS + IN_FLIGHT);
    for (const r of flood.filter((x) => x.status === 401)) expect(r.body.error.code).toBe('signature_invalid');
    for (const r of flood.filter((x) => x.status === 429)) expectRefused(r);

    // Nothing was counted in the key's rate windows: failures never spend a merchant's limit.
    expect(await hitsOfKey()).toBe(hitsBefore);
    // The merchant, on its own address, has its 60 requests a second.
    const own = await Promise.all(
      Array.from({ length: 60 }, () => merchant.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${shop.keys.test.secretKey}` } })),
    );
    expect(count(own, 200)).toBe(60);
  });

  it('200 operator-token guesses: exactly 20 get 401, the rest 429, and the right token from that address too; the operator elsewhere is served', async () => {
    const guesser = from('127.0.0.6');
    const replies: AddressedReply[] = [];
    for (let i = 0; i < 200; i++) {
      replies.push(
        await guesser.request('GET', '/admin/v1/webhook-deliveries', { headers: { authorization: `Bearer ${randomBytes(24).toString('base64url')}` } }),
      );
    }
    tally('operator_token', replies);
    expect(statuses(replies)).toEqual([...Array(PER_ADDRESS).fill(401), ...Array(200 - PER_ADDRESS).fill(429)]);
    for (const r of replies.slice(PER_ADDRESS)) expectRefused(r);
    const right = await guesser.request('GET', '/admin/v1/webhook-deliveries', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    tally('operator_token', [right]);
    expectRefused(right);
    // The same for the token-protected metrics and readiness detail.
    expectRefused(await guesser.request('GET', '/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }));
    expectRefused(await guesser.request('GET', '/health/ready', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }));
    seen.refused.operator_token += 2;
    expectStatus(await operator.http.get('/admin/v1/webhook-deliveries'), 200);
  });

  it('past the overall limit every address that failed is refused at once, and an address without failures is served', async () => {
    // 10 addresses with 10 failures each: no address reaches 20, together they reach 100.
    const attackers = Array.from({ length: 10 }, (_, i) => from(`127.0.0.${20 + i}`));
    for (const a of attackers) {
      const replies = await Promise.all(
        Array.from({ length: 10 }, () => a.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } })),
      );
      tally('secret_key', replies);
      expect(statuses(replies)).toEqual(Array(10).fill(401));
    }
    for (const a of attackers) {
      const again = await a.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } });
      tally('secret_key', [again]);
      expectRefused(again);
    }
    const clean = from('127.0.0.40');
    expect((await clean.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${shop.keys.live.secretKey}` } })).status).toBe(200);
    // A fresh address's first failure is still looked up (and answered 401); its next is refused.
    const fresh = from('127.0.0.41');
    const first = await fresh.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } });
    const second = await fresh.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } });
    tally('secret_key', [first, second]);
    expect(first.status).toBe(401);
    expectRefused(second);
  });

  it('counts every failure and every refusal in auth_failures_total and auth_failures_refused_total, by kind', async () => {
    const text = await (await fetch(`${gateway.baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    const valueOf = (name: string, kind: string): number => {
      const line = text.split('\n').find((l) => l.startsWith(`${name}{kind="${kind}"}`));
      if (!line) throw new Error(`no ${name}{kind="${kind}"} in the metrics`);
      return Number(line.split(' ').pop());
    };
    for (const kind of ['secret_key', 'signature', 'operator_token'] as const) {
      expect({ kind, failed: valueOf('auth_failures_total', kind), refused: valueOf('auth_failures_refused_total', kind) }).toEqual({
        kind,
        failed: seen.failed[kind],
        refused: seen.refused[kind],
      });
    }
  });
});

describe('behind a reverse proxy (TRUSTED_PROXIES): the client is the one X-Forwarded-For names, and only a trusted proxy may name it', () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  const clients: ClientAt[] = [];

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    gateway = await startGateway('api', {
      DATABASE_URL: db.url,
      ADMIN_TOKEN,
      TRUSTED_PROXIES: '127.0.0.1',
      AUTH_FAILURE_LIMIT_PER_ADDRESS: '3',
      AUTH_FAILURE_LIMIT_OVERALL: '1000',
    });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await gateway?.kill();
    await db?.drop();
  });

  const badKey = (client: ClientAt, forwardedFor: string) =>
    client.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}`, 'x-forwarded-for': forwardedFor } });

  it('counts each forwarded client apart behind the trusted proxy; an untrusted peer cannot escape its limit by naming others', async () => {
    const proxy = clientAt(gateway.baseUrl, '127.0.0.1');
    const direct = clientAt(gateway.baseUrl, '127.0.0.2');
    clients.push(proxy, direct);

    const first = [await badKey(proxy, '203.0.113.5'), await badKey(proxy, '203.0.113.5'), await badKey(proxy, '203.0.113.5')];
    expect(statuses(first)).toEqual([401, 401, 401]);
    expectRefused(await badKey(proxy, '203.0.113.5'));
    // Another buyer behind the same proxy is another client.
    expect((await badKey(proxy, '203.0.113.6')).status).toBe(401);

    // Not a trusted proxy: its own address counts, whatever it claims.
    const claims = [await badKey(direct, '198.51.100.1'), await badKey(direct, '198.51.100.2'), await badKey(direct, '198.51.100.3')];
    expect(statuses(claims)).toEqual([401, 401, 401]);
    expectRefused(await badKey(direct, '198.51.100.4'));
  });

  it("believes X-Forwarded-Proto only from the trusted proxy: the console's session cookie is Secure through it, not when another peer claims https", async () => {
    const proxy = clientAt(gateway.baseUrl, '127.0.0.1');
    const direct = clientAt(gateway.baseUrl, '127.0.0.3');
    clients.push(proxy, direct);
    const login = (client: ClientAt) =>
      client.request('POST', '/admin/login', {
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-proto': 'https' },
        body: new URLSearchParams({ token: ADMIN_TOKEN }).toString(),
      });
    const attributes = (reply: AddressedReply) =>
      String(reply.headers['set-cookie'])
        .split(';')
        .map((a) => a.trim());

    const viaProxy = await login(proxy);
    expect(viaProxy.status).toBe(303);
    expect(attributes(viaProxy)).toContain('Secure');

    const claimed = await login(direct);
    expect(claimed.status).toBe(303);
    expect(attributes(claimed)[0]).toMatch(/^operator_session=[A-Za-z0-9_-]{43}$/);
    expect(attributes(claimed)).not.toContain('Secure');
  });
});
