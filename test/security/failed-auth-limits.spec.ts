/**
 * Failed authentication is limited (issue 32), per API process, on the gateway clock:
 * only attempts that fail are counted and limited. Past 20 failures of one client
 * address in a minute (or past the overall limit), a failing attempt is answered 429
 * rate_limited with Retry-After instead of 401, without a lookup; a credential that
 * holds (a secret key, a signature, the operator token) is never refused, from any
 * address; a valid key's own refusals (a replayed signature, a stale timestamp) are no
 * failures of its address; nothing counts against a key's request limit. Failures,
 * refusals and the lookups failures cost are in auth_failures_total,
 * auth_failures_refused_total and auth_failure_lookups_total.
 *
 * Clients are told apart by their address: the test binds them to 127.0.0.2, …
 * (the operator's own calls come from 127.0.0.1, which never fails here).
 */
import { randomBytes } from 'node:crypto';
import type { PoolClient } from 'pg';
import { ClientAt, clientAt, inBatches, AddressedReply } from '../support/from-address';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { CYRILLIC, Merchant, Operator } from '../support/merchant-fixtures';
import { signRequest } from '../support/signing';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-failed-auth-tests-0042';
/** The defaults: AUTH_FAILURE_LIMIT_PER_ADDRESS and AUTH_FAILURE_LIMIT_OVERALL. */
const PER_ADDRESS = 20;
const OVERALL = 300;
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

describe('failed authentication is limited per client address and overall, and only failures are', () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  let operator: Operator;
  let shop: Merchant;
  let webhookSecret: string;
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
  const metric = async (name: string, kind: string): Promise<number> => {
    const text = await (await fetch(`${gateway.baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{kind="${kind}"}`));
    if (!line) throw new Error(`no ${name}{kind="${kind}"} in the metrics`);
    return Number(line.split(' ').pop());
  };
  const now = async () => String(Math.floor((await operator.advance(0)).getTime() / 1000));
  const signedBalance = (client: ClientAt, timestamp: string, signature = signRequest(webhookSecret, timestamp)) =>
    client.request('GET', '/v1/balance', { headers: { 'x-public-id': shop.keys.test.publicKey, 'x-timestamp': timestamp, 'x-signature': signature } });

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    gateway = await startGateway('gateway', {
      DATABASE_URL: db.url,
      ADMIN_TOKEN,
      // The windows are moved on by the test, a minute at a time.
      CLOCK: 'manual',
    });
    operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    shop = await operator.merchant({ name: 'Настоящий магазин' });
    webhookSecret = shop.project.webhookSecret;
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

  it('200 random secret keys from one address, 10 at a time: exactly 20 get 401, the rest 429 without a lookup; the right key from that address is served', async () => {
    const attacker = from('127.0.0.2');
    const merchant = from('127.0.0.3');
    const flood = await inBatches(
      Array.from({ length: 200 }, () => () => attacker.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } })),
      IN_FLIGHT,
    );
    tally('secret_key', flood);
    // Counted and judged in one step: exact, however many are in flight.
    expect(count(flood, 401)).toBe(PER_ADDRESS);
    expect(count(flood, 429)).toBe(200 - PER_ADDRESS);
    for (const r of flood.filter((x) => x.status === 401)) expect(r.body.error.code).toBe('unauthorized');
    for (const r of flood.filter((x) => x.status === 429)) {
      expectRefused(r);
      expect(r.body.error.message).toBe('Слишком много неудачных попыток авторизации с этого адреса: повторите запрос позже');
    }
    // A key without the tag every issued key carries was never issued: none was looked up.
    expect(await metric('auth_failure_lookups_total', 'secret_key')).toBe(0);

    // Refused without a lookup: with the key table locked, a lookup would wait; these are answered at once.
    const locker: PoolClient = await db.pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE');
      const whileLocked = await Promise.all(
        Array.from({ length: 20 }, () => attacker.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } })),
      );
      tally('secret_key', whileLocked);
      for (const r of whileLocked) expectRefused(r);
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
    }

    // The right key from the attacker's own address (a NAT shared with the merchant): served.
    expect((await attacker.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${shop.keys.test.secretKey}` } })).status).toBe(200);
    expect((await merchant.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${shop.keys.test.secretKey}` } })).status).toBe(200);
    // A wrong key from the merchant's address is a plain 401: its own count is one.
    const typo = await merchant.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } });
    tally('secret_key', [typo]);
    expect(typo.status).toBe(401);

    // A minute later (on the clock) the attacker's failures are 401 again.
    await operator.advance(61);
    const later = await attacker.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } });
    tally('secret_key', [later]);
    expect(later.status).toBe(401);
  });

  it("250 bad signatures with a real merchant's public id: 20 × 401, then 429; none looked up or counted in the key's limit; a good signature from that address is served", async () => {
    const attacker = from('127.0.0.4');
    const timestamp = await now();
    // The key's hits from the flood's second on: the sweep of windows older than a minute
    // (the clock was moved on by earlier tests) may empty older ones meanwhile, never these.
    const hitsOfKey = async (): Promise<number> => {
      const counted = await db.pool.query<{ hits: string }>(
        'SELECT coalesce(sum(w.hits), 0) AS hits FROM rate_limit_windows w JOIN api_keys k ON k.id = w.key_id WHERE k.public_key = $1 AND w.window_second >= $2',
        [shop.keys.test.publicKey, Number(timestamp)],
      );
      return Number(counted.rows[0]!.hits);
    };
    const hitsBefore = await hitsOfKey();
    const flood = await inBatches(
      Array.from({ length: 250 }, (_, i) => () => signedBalance(attacker, timestamp, signRequest(`whsec_guess_${i}`, timestamp))),
      IN_FLIGHT,
    );
    tally('signature', flood);
    expect(count(flood, 401)).toBe(PER_ADDRESS);
    for (const r of flood.filter((x) => x.status === 401)) expect(r.body.error.code).toBe('signature_invalid');
    for (const r of flood.filter((x) => x.status === 429)) expectRefused(r);
    // The public id's webhook secret is known to the process: a wrong signature is told apart without the database.
    expect(await metric('auth_failure_lookups_total', 'signature')).toBe(0);
    // Nothing was counted in the key's rate windows: failures never spend a merchant's limit.
    expect(await hitsOfKey()).toBe(hitsBefore);

    // The merchant behind the same address signs correctly: served, and its 60 a second are whole.
    expect((await signedBalance(attacker, await now())).status).toBe(200);
    const own = await Promise.all(
      Array.from({ length: 59 }, () => attacker.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${shop.keys.test.secretKey}` } })),
    );
    expect(count(own, 200)).toBe(59);
  });

  it("a valid key's own refusals (30 replays, 30 stale timestamps) are no failures of its address: all 401, and the address's next failure is its first", async () => {
    const office = from('127.0.0.5');
    const timestamp = await now();
    expect((await signedBalance(office, timestamp)).status).toBe(200);
    const replays = await Promise.all(Array.from({ length: 30 }, () => signedBalance(office, timestamp)));
    const stale = String(Number(timestamp) - 301);
    const late = await Promise.all(Array.from({ length: 30 }, () => signedBalance(office, stale)));
    expect(statuses(replays)).toEqual(Array(30).fill(401));
    for (const r of replays) expect(r.body.error.code).toBe('signature_invalid');
    expect(statuses(late)).toEqual(Array(30).fill(401));
    for (const r of late) expect(r.body.error.code).toBe('timestamp_invalid');
    const failed = await inBatches(
      Array.from({ length: PER_ADDRESS }, () => () => office.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } })),
      IN_FLIGHT,
    );
    tally('secret_key', failed);
    expect(statuses(failed)).toEqual(Array(PER_ADDRESS).fill(401));
    const past = await office.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } });
    tally('secret_key', [past]);
    expectRefused(past);
  });

  it('200 operator-token guesses: exactly 20 get 401, the rest 429; the right token from that address is served everywhere', async () => {
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
    const wrongAgain = [
      await guesser.request('GET', '/metrics', { headers: { authorization: 'Bearer wrong' } }),
      await guesser.request('GET', '/health/ready', { headers: { authorization: 'Bearer wrong' } }),
    ];
    tally('operator_token', wrongAgain);
    for (const r of wrongAgain) expectRefused(r);
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    expect((await guesser.request('GET', '/admin/v1/webhook-deliveries', { headers: auth })).status).toBe(200);
    expect((await guesser.request('GET', '/metrics', { headers: auth })).status).toBe(200);
    expect((await guesser.request('GET', '/health/ready', { headers: auth })).status).toBe(200);
    expect(await metric('auth_failure_lookups_total', 'operator_token')).toBe(0);
  });

  it('past the overall limit every failure gets 429, from any address; every credential that holds is served', async () => {
    // 20 addresses with 15 failures each: no address reaches 20, together they reach 300.
    const attackers = Array.from({ length: 20 }, (_, i) => from(`127.0.0.${20 + i}`));
    for (const a of attackers) {
      const replies = await Promise.all(
        Array.from({ length: OVERALL / 20 }, () => a.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } })),
      );
      tally('secret_key', replies);
      expect(statuses(replies)).toEqual(Array(OVERALL / 20).fill(401));
    }
    for (const a of attackers) {
      const again = await a.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } });
      tally('secret_key', [again]);
      expectRefused(again);
    }
    // A merchant that mistyped once, on a fresh address: its typo is past the overall limit, its key is served.
    const merchant = from('127.0.0.41');
    const typo = await merchant.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${randomSecretKey()}` } });
    tally('secret_key', [typo]);
    expectRefused(typo);
    // Its own address is within its limit: the answer blames the server's overall count, not the address.
    expect(typo.body.error.message).toBe(
      `Слишком много неудачных попыток авторизации на этом сервере со всех адресов: повторите запрос через ${typo.headers['retry-after']} с`,
    );
    expect((await merchant.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${shop.keys.live.secretKey}` } })).status).toBe(200);
    expect((await attackers[0]!.request('GET', '/v1/methods', { headers: { authorization: `Bearer ${shop.keys.test.secretKey}` } })).status).toBe(200);
    expect((await signedBalance(attackers[1]!, await now())).status).toBe(200);
    expect((await attackers[2]!.request('GET', '/admin/v1/webhook-deliveries', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status).toBe(200);
  });

  it('counts every failure and every refusal in auth_failures_total and auth_failures_refused_total, by kind', async () => {
    for (const kind of ['secret_key', 'signature', 'operator_token'] as const) {
      expect({ kind, failed: await metric('auth_failures_total', kind), refused: await metric('auth_failures_refused_total', kind) }).toEqual({
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
      // Three failures reach an address's limit: the test tells the forwarded clients apart with a few requests.
      AUTH_FAILURE_LIMIT_PER_ADDRESS: '3',
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

    // Names that are not addresses are counted for the proxy that sent them, not one count each.
    const junk = [await badKey(proxy, 'junk1'), await badKey(proxy, 'junk2'), await badKey(proxy, 'unknown')];
    expect(statuses(junk)).toEqual([401, 401, 401]);
    expectRefused(await badKey(proxy, 'junk4'));

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
