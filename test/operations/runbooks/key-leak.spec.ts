/**
 * The runbook "A key leak" of docs/operations.md, executed (issue 33): two API
 * processes and a projector process on one database, each part as the runbook prints it:
 * - a merchant's secret key: the rotate call; the old pair (secret and public key)
 *   is refused at once by every API process, the new one accepted, the other mode's
 *   untouched; the review calls work with the new key;
 * - a project's webhook secret: the rotate call as printed; the old secret is refused
 *   by every API process right after its answer, the new one signs the webhooks and
 *   the HMAC requests in every process; a receiver that still checks the old secret
 *   gets the webhook again by a resend once it has the new one; the call's refusals
 *   (404, 401, 400) change nothing; a stored secret that does not open (sealed for
 *   another project) stops only that project's HMAC requests and webhooks, naming the
 *   project and the call, and the call replaces it;
 * - the operator token: a rolling restart of the API processes with a new ADMIN_TOKEN;
 *   the old token works on a replica not yet restarted, then nowhere; the new one is
 *   never printed; the review queries run.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { RunningGateway, startGateway, temporaryDataDir } from '../../support/gateway-process';
import { api, expectError, expectStatus, Merchant, orderId, poll, sleep } from '../../support/merchant-fixtures';
import { paidInvoice } from '../../support/money-out-fixtures';
import { sendSigned } from '../../support/signing';
import { after, Deployment, docSection, inlineCode, operatorCall, startDeployment } from '../../support/runbooks';
import { createTestDatabase, TestDatabase } from '../../support/test-database';
import { startWebhookReceiver, validSignature, WebhookReceiver } from '../../support/webhook-receiver';

jest.setTimeout(120_000);

const RUNBOOK = docSection('A key leak');
const SECRET_KEY_PART = after(RUNBOOK, "**A merchant's secret key**");
const WEBHOOK_SECRET_PART = after(RUNBOOK, "**A project's webhook secret**");
const OPERATOR_TOKEN_PART = after(RUNBOOK, '**The operator token**');

/** Each signed request of this file has a second of its own (a signature is accepted once). */
const LOADED_AT_SECOND = Math.floor(Date.now() / 1000);
let signed = 0;
const signedBalance = (baseUrl: string, publicId: string, secret: string) =>
  sendSigned(baseUrl, { method: 'GET', path: '/v1/balance', publicId, secret, timestamp: LOADED_AT_SECOND - signed++ });

describe('runbook: a key leak', () => {
  let db: TestDatabase;
  const data = temporaryDataDir();
  let receiver: WebhookReceiver;
  let gateway: Deployment;
  /** The second API process. */
  let replica: RunningGateway;
  let shop: Merchant;
  let env: Record<string, string>;
  const oldToken = randomBytes(24).toString('base64');
  /** The live public key after the rotation of the first part. */
  let freshLivePublicKey: string;

  /** The API processes started again with the new operator token. */
  const restarted: RunningGateway[] = [];
  const apis = () => [gateway.api, replica];

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    receiver = await startWebhookReceiver();
    env = {
      DATABASE_URL: db.url,
      // A key file of its own (not ./data of the checkout), which the sealing script must be given too.
      DATA_DIR: data.dir,
      // Two API processes: they must share one operator token.
      ADMIN_TOKEN: oldToken,
      // The merchant's receiver listens on 127.0.0.1.
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    };
    gateway = await startDeployment(env);
    replica = await startGateway('api', env);
    shop = await gateway.operator.merchant({ webhookUrl: receiver.url } as never);
  });
  afterAll(async () => {
    for (const p of restarted) await p.kill();
    await replica?.kill();
    await gateway?.stop();
    await receiver?.close();
    await db?.drop();
    data.remove();
  });

  it("a merchant's secret key: rotated, the old pair is refused at once by every API process and the new one works", async () => {
    const paid = await paidInvoice(gateway.operator, shop.live, '500.00');
    for (const p of apis()) expectStatus(await api(p.baseUrl, shop.keys.live.secretKey).get('/v1/balance'), 200);

    const rotate = inlineCode(SECRET_KEY_PART, 'POST /admin/v1/projects/');
    const body = JSON.parse(inlineCode(SECRET_KEY_PART, '{"mode": '));
    expect(body).toEqual({ mode: 'live' });
    const rotated = await operatorCall(gateway, rotate, { '{id}': shop.projectId }, body);
    expectStatus(rotated, 201);
    const fresh = rotated.body as { secretKey: string; publicKey: string };
    freshLivePublicKey = fresh.publicKey;
    expect(fresh.secretKey).toMatch(/^sk_live_/);

    // At once, in every API process: the old secret key and the old public key refused, the new pair accepted.
    for (const p of apis()) {
      expect((await api(p.baseUrl, shop.keys.live.secretKey).get('/v1/balance')).status).toBe(401);
      expect((await signedBalance(p.baseUrl, shop.keys.live.publicKey, shop.project.webhookSecret)).status).toBe(401);
      expectStatus(await api(p.baseUrl, fresh.secretKey).get('/v1/balance'), 200);
      expectStatus(await signedBalance(p.baseUrl, fresh.publicKey, shop.project.webhookSecret), 200);
      // The other mode's pair is not touched.
      expectStatus(await api(p.baseUrl, shop.keys.test.secretKey).get('/v1/balance'), 200);
    }

    // 2. The review: the project's invoices with the new key, and the account's ledger.
    // (The list is a read model, fed apart: it may take a moment.)
    await poll(
      async () => (await api(gateway.api.baseUrl, fresh.secretKey).get('/v1/invoices?limit=10')).body.items?.map((i: { id: string }) => i.id) ?? [],
      (ids: string[]) => ids.includes(paid),
      'the invoice paid with the old key, listed with the new one',
    );
    expectStatus(await gateway.operator.http.get(`/admin/v1/accounts/${shop.accountId}/ledger?mode=live`), 200);
  });

  it("a project's webhook secret: the rotate call as printed; the old secret is refused at once everywhere, the new one signs webhooks and requests", async () => {
    const oldSecret = shop.project.webhookSecret as string;
    // The merchant's receiver checks the signature with the secret the merchant holds.
    let merchantSecret = oldSecret;
    receiver.answer = (w) => (validSignature(w, merchantSecret) ? { status: 200, body: 'ok' } : { status: 401, body: 'bad signature' });
    const keys = [shop.keys.test.publicKey, freshLivePublicKey];
    // Both API processes remember the old secret of both public keys.
    for (const p of apis()) for (const publicKey of keys) expectStatus(await signedBalance(p.baseUrl, publicKey, oldSecret), 200);

    // 1. The call as printed, without a body.
    const call = inlineCode(WEBHOOK_SECRET_PART, 'POST /admin/v1/projects/');
    expect(call).toBe('POST /admin/v1/projects/{id}/webhook-secret/rotate');
    const rotated = await operatorCall(gateway, call, { '{id}': shop.projectId });
    expectStatus(rotated, 201);
    expect(Object.keys(rotated.body)).toEqual(['webhookSecret']);
    const newSecret = rotated.body.webhookSecret as string;
    expect(newSecret).toMatch(/^whsec_[A-Za-z0-9_-]{32}$/);
    expect(newSecret).not.toBe(oldSecret);
    // Right after the answer, in every API process (the replica still remembering the old one): the old secret refused.
    for (const p of apis()) {
      for (const publicKey of keys) expect((await signedBalance(p.baseUrl, publicKey, oldSecret)).status).toBe(401);
    }
    // Stored sealed, with the key the other projects' secrets carry; GET shows it in clear in every API process.
    const stored = await db.pool.query<{ webhook_secret: string }>('SELECT webhook_secret FROM projects WHERE id = $1', [shop.projectId]);
    expect(stored.rows[0]!.webhook_secret).not.toContain(newSecret.slice(6));
    expect((await db.pool.query("SELECT DISTINCT split_part(webhook_secret, ':', 3) FROM projects")).rowCount).toBe(1);
    for (const p of apis()) expect((await api(p.baseUrl, oldToken).get(`/admin/v1/projects/${shop.projectId}`)).body.webhookSecret).toBe(newSecret);
    // The new one accepted within a poll of the processes (they remember each public key's secret).
    for (const p of apis()) {
      for (const publicKey of keys) {
        // Each refused try counts as a failed authentication of this address: tried every 100 ms.
        const deadline = Date.now() + 1_500;
        while ((await signedBalance(p.baseUrl, publicKey, newSecret)).status !== 200) {
          if (Date.now() > deadline) throw new Error(`${p.baseUrl} still refuses the new secret`);
          await sleep(100);
        }
        expect((await signedBalance(p.baseUrl, publicKey, oldSecret)).status).toBe(401);
      }
    }

    // Webhooks are signed with the new secret. 2. The merchant's receiver, still on the old one, rejects them ...
    const invoiceId = await paidInvoice(gateway.operator, shop.test, '100.00');
    await receiver.waitFor((r) => r.some((w) => w.body?.data?.invoice?.id === invoiceId), 'the webhook signed with the new secret');
    const webhook = receiver.received.find((w) => w.body?.data?.invoice?.id === invoiceId)!;
    expect(validSignature(webhook, newSecret)).toBe(true);
    expect(validSignature(webhook, oldSecret)).toBe(false);
    const deliveryId = webhook.headers['x-service-delivery-id'] as string;
    const rejected = await poll(
      async () =>
        (await gateway.operator.http.get(`/admin/v1/webhook-deliveries?projectId=${shop.projectId}`)).body.items.find(
          (d: { id: string }) => d.id === deliveryId,
        ),
      (d) => d?.attempts?.length === 1,
      'the rejected attempt recorded',
    );
    expect(rejected).toMatchObject({ status: 'pending', attempts: [{ statusCode: 401 }] });
    // ... until the merchant uses the new secret; then the delivery is resent (a pending one is sent at once).
    merchantSecret = newSecret;
    expectStatus(await gateway.operator.http.post(`/admin/v1/webhook-deliveries/${deliveryId}/resend`), 202);
    await receiver.waitFor((r) => r.filter((w) => w.headers['x-service-delivery-id'] === deliveryId).length === 2, 'the resent webhook');
    await poll(
      async () =>
        (await gateway.operator.http.get(`/admin/v1/webhook-deliveries?projectId=${shop.projectId}`)).body.items.find(
          (d: { id: string }) => d.id === deliveryId,
        ),
      (d) => d?.status === 'delivered',
      'the delivery delivered',
    );
  });

  it('the rotate call: 404 for an unknown project (before the body), 401 without the operator token, 400 for a body field or a query parameter; none changes the secret', async () => {
    const secretNow = async () => (await gateway.operator.http.get(`/admin/v1/projects/${shop.projectId}`)).body.webhookSecret as string;
    const before = await secretNow();
    const rotate = (id: string) => `/admin/v1/projects/${id}/webhook-secret/rotate`;
    expectError(await gateway.operator.http.post(rotate(randomUUID()), { bogus: 1 }), 404, 'not_found');
    expectError(await gateway.operator.http.post(rotate('not-a-project')), 404, 'not_found');
    expectError(await api(gateway.api.baseUrl).post(rotate(shop.projectId)), 401, 'unauthorized');
    expectError(await api(gateway.api.baseUrl, shop.keys.test.secretKey).post(rotate(shop.projectId)), 401, 'unauthorized');
    expectError(await gateway.operator.http.post(rotate(shop.projectId), { webhookSecret: 'whsec_chosen-by-the-caller' }), 400, 'validation');
    expectError(await gateway.operator.http.post(rotate(shop.projectId), ['x']), 400, 'validation');
    expectError(await gateway.operator.http.post(`${rotate(shop.projectId)}?projectId=${shop.projectId}`), 400, 'validation');
    expect(await secretNow()).toBe(before);
    // An empty object is no body: rotated, a new secret each call (no idempotency: the last answer's is in force).
    const first = await gateway.operator.http.post(rotate(shop.projectId), {});
    expectStatus(first, 201);
    // The id in capitals names the same project (and the secret is sealed for the project, so it opens).
    const second = await gateway.operator.http.post(rotate(shop.projectId.toUpperCase()));
    expectStatus(second, 201);
    expect(new Set([before, first.body.webhookSecret, second.body.webhookSecret]).size).toBe(3);
    expect(await secretNow()).toBe(second.body.webhookSecret);
  });

  it('a stored secret that does not open (sealed for another project): Bearer works, HMAC fails and webhooks wait, naming the project and the call, which replaces it', async () => {
    const other = await gateway.operator.merchant({ webhookUrl: receiver.url } as never);
    receiver.answer = () => ({ status: 200, body: 'ok' });
    // The mistake: a value sealed for another project stored in this project's row (the table's check takes it).
    await db.pool.query('UPDATE projects SET webhook_secret = (SELECT webhook_secret FROM projects WHERE id = $2) WHERE id = $1', [
      other.projectId,
      shop.projectId,
    ]);
    const advice = [other.projectId, `/admin/v1/projects/${other.projectId}/webhook-secret/rotate`];
    const named = (text: string) => advice.every((part) => text.includes(part));
    const otherSecret = other.project.webhookSecret as string;

    for (const p of apis()) {
      // Bearer requests of the project never open the secret.
      expectStatus(await api(p.baseUrl, other.keys.test.secretKey).get('/v1/balance'), 200);
      expectStatus(await api(p.baseUrl, other.keys.live.secretKey).post('/v1/invoices', { amount: '10.00', orderId: orderId('unopenable') }), 201);
    }
    // An HMAC request is not checked with a secret that does not open (once each process forgot the one it remembered).
    for (const p of apis()) {
      await poll(
        async () => (await signedBalance(p.baseUrl, other.keys.test.publicKey, otherSecret)).status,
        (status) => status === 500,
        `${p.baseUrl} refusing to check a signature with the unopenable secret`,
      );
      await poll(async () => p.output(), named, `${p.baseUrl} logging the project and the call`);
    }
    // The operator's view says what to do; a process starting now starts (and says it too).
    const shown = await gateway.operator.http.get(`/admin/v1/projects/${other.projectId}`);
    expectError(shown, 500, 'internal');
    expect(named(shown.body.error.message)).toBe(true);
    const third = await startGateway('api', env);
    try {
      expect(named(third.output())).toBe(true);
      expectStatus(await api(third.baseUrl, other.keys.test.secretKey).get('/v1/balance'), 200);
    } finally {
      await third.kill();
    }
    // A webhook is not signed: nothing is sent, and no attempt is charged to the merchant (its schedule, its endpoint's
    // health); the projector's log names the project and the call.
    const invoiceId = await paidInvoice(gateway.operator, other.test, '100.00');
    await poll(
      async () => gateway.projector.output(),
      (text) => text.split('\n').some((line) => line.includes('cannot be signed here') && named(line)),
      'the unsigned webhook told',
    );
    const delivery = (await gateway.operator.http.get(`/admin/v1/webhook-deliveries?projectId=${other.projectId}`)).body.items[0];
    expect({ status: delivery.status, attempts: delivery.attempts }).toEqual({ status: 'pending', attempts: [] });
    expect(receiver.received.some((w) => w.body?.data?.invoice?.id === invoiceId)).toBe(false);

    // The way out: the call, which never opens the old secret.
    const rotated = await gateway.operator.http.post(`/admin/v1/projects/${other.projectId}/webhook-secret/rotate`);
    expectStatus(rotated, 201);
    const newSecret = rotated.body.webhookSecret as string;
    expect((await gateway.operator.http.get(`/admin/v1/projects/${other.projectId}`)).body.webhookSecret).toBe(newSecret);
    for (const p of apis()) {
      await poll(
        async () => (await signedBalance(p.baseUrl, other.keys.test.publicKey, newSecret)).status,
        (status) => status === 200,
        `${p.baseUrl} accepting the new secret`,
      );
    }
    // The delivery waited, pending: sent once the projector claims its URL again (15 s after it could not sign), signed with the new secret.
    await receiver.waitFor((r) => r.some((w) => w.body?.data?.invoice?.id === invoiceId), 'the webhook signed with the new secret', 40_000);
    expect(
      validSignature(
        receiver.received.find((w) => w.body?.data?.invoice?.id === invoiceId)!,
        newSecret,
      ),
    ).toBe(true);
  });

  it('the operator token: a rolling restart with a new ADMIN_TOKEN; the old one stops on each replica as it restarts, the new one is never printed', async () => {
    // 1. A new token, 32 characters as `openssl rand -base64 24` prints.
    expect(inlineCode(OPERATOR_TOKEN_PART, 'openssl rand')).toBe('openssl rand -base64 24');
    const newToken = spawnSync('openssl', ['rand', '-base64', '24'], { encoding: 'utf8' }).stdout.trim();
    expect(newToken).toHaveLength(32);
    const operatorReads = async (baseUrl: string, token: string): Promise<number[]> => {
      const client = api(baseUrl, token);
      return [
        (await client.get(`/admin/v1/projects/${shop.projectId}`)).status,
        (await client.get('/metrics')).status,
        (await client.get('/health/ready')).status,
      ];
    };

    // Restart the API processes one at a time with the new token.
    await gateway.api.kill();
    const first = await startGateway('api', { ...env, ADMIN_TOKEN: newToken });
    restarted.push(first);
    expect(await operatorReads(first.baseUrl, newToken)).toEqual([200, 200, 200]);
    expect(await operatorReads(first.baseUrl, oldToken)).toEqual([401, 401, 401]);
    // During the rolling restart the old token still works on the replica not yet restarted.
    expect(await operatorReads(replica.baseUrl, oldToken)).toEqual([200, 200, 200]);
    await replica.kill();
    restarted.push(await startGateway('api', { ...env, ADMIN_TOKEN: newToken }));
    for (const p of restarted) {
      expect(await operatorReads(p.baseUrl, newToken)).toEqual([200, 200, 200]);
      expect(await operatorReads(p.baseUrl, oldToken)).toEqual([401, 401, 401]);
      // 3. A token from the environment is never printed.
      expect(p.output()).toContain('operator token: the ADMIN_TOKEN of the environment (not printed)');
      expect(p.output()).not.toContain(newToken);
    }

    // 4. What it may have done: the columns and the operator API's streams the step names, read as printed.
    const review = after(OPERATOR_TOKEN_PART, '4. Review what it may have done');
    const columns = [...review.matchAll(/`([a-z_]+)\.([a-z_]+)`(?:\/`([a-z_]+)`)?/g)].map(
      (m) => [m[1]!, ...m.slice(2).filter(Boolean)] as [string, ...string[]],
    );
    expect(columns).toEqual([
      ['projects', 'created_at'],
      ['api_keys', 'created_at', 'revoked_at'],
      ['payout_addresses', 'confirmed_at'],
    ]);
    for (const [table, ...named] of columns) await db.pool.query(`SELECT ${named.join(', ')} FROM ${table} ORDER BY ${named[0]} DESC LIMIT 10`);
    const keys = await db.pool.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM api_keys WHERE project_id = $1', [shop.projectId]);
    expect(keys.rows.filter((k) => k.revoked_at !== null).length).toBeGreaterThan(0);
    const streams = [...review.matchAll(/`GET (\/admin\/v1\/streams\/(\w+)-<id>)`/g)].map((m) => [m[1]!, m[2]!] as const);
    expect(streams.map(([, kind]) => kind)).toEqual(['payout', 'invoice']);
    const invoice = await api(first.baseUrl, shop.keys.test.secretKey).post('/v1/invoices', { amount: '100.00', orderId: orderId('review'), method: 'sbp' });
    const operatorApi = api(first.baseUrl, newToken);
    const invoiceStream = await operatorApi.get(streams[1]![0].replace('<id>', invoice.body.id));
    expectStatus(invoiceStream, 200);
    expect(invoiceStream.body.events[0].type).toBe('InvoiceCreated');
    // No payout here: the route answers for one that is not, in the error shape.
    expectError(await operatorApi.get(streams[0]![0].replace('<id>', '999999')), 404, 'not_found');
  });
});
