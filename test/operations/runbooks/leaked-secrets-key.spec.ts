/**
 * The runbook "A leaked secrets key" of docs/operations.md, executed (issue 33), in its
 * two variants, each with an API process and a projector process apart:
 * - the key file: the embedded server under DATA_DIR; `secrets:rotate-key` run twice
 *   with the gateway's DATA_DIR while the gateway runs. Every secret is sealed with the
 *   new key, the leaked key is gone from the file, the running processes go on (signed
 *   requests, signed webhooks, a new project) and a process started afterwards starts;
 *   a payment-page form token made with the leaked key is refused once it is gone.
 * - SECRETS_KEY: every process restarted with `new,old`, the command run with it, then
 *   every process restarted with `new`; a process with only the new key refuses to
 *   start before the command ran, and one with only the old key after.
 * - a stored secret that does not open (sealed for another project, or with a key no
 *   process holds): the command changes nothing, naming each project and the rotate
 *   call; after the call it rotates.
 * - step 2 after the SECRETS_KEY variant, in the doc's order (the database leaked too,
 *   the signing key sealed there): every project's webhook secret changed with the
 *   call of "A key leak", then `npm run audit:rotate-signing-key`; the known secret is
 *   refused, the leaked signing key retired and a new one, sealed with the new key,
 *   signs. The rotate call itself is tested in key-leak.spec.ts.
 */
import { execSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { fixedKeys, keyIdOf, SecretBox } from '#platform/secrets';
import { webhookSecretOwner } from '#payments/merchants';
import { RunningGateway, RunningProcess, startGateway, startProcess, temporaryDataDir, PROJECTOR_PUBLIC_URL } from '../../support/gateway-process';
import { ADMIN_TOKEN, expectStatus, Merchant, Operator, orderId } from '../../support/merchant-fixtures';
import { paidInvoice } from '../../support/money-out-fixtures';
import { sendSigned } from '../../support/signing';
import {
  after,
  Deployment,
  docSection,
  embeddedDatabaseUrl,
  inlineCode,
  operatorCall,
  runPrinted,
  runPrintedOk,
  startDeployment,
} from '../../support/runbooks';
import { createTestDatabase, TestDatabase } from '../../support/test-database';
import { startWebhookReceiver, validSignature, WebhookReceiver } from '../../support/webhook-receiver';

jest.setTimeout(120_000);

const RUNBOOK = docSection('A leaked secrets key');

/** Each signed request of this file has a second of its own (a signature is accepted once). */
const LOADED_AT_SECOND = Math.floor(Date.now() / 1000);
let signed = 0;
const signedBalance = (baseUrl: string, m: Merchant) =>
  sendSigned(baseUrl, {
    method: 'GET',
    path: '/v1/balance',
    publicId: m.keys.test.publicKey,
    secret: m.project.webhookSecret,
    timestamp: LOADED_AT_SECOND - signed++,
  });

/** The gateway works with its secrets: a signed request is accepted, and a payment's webhook is signed with the project's secret. */
async function expectSecretsWork(gateway: Deployment, merchant: Merchant, receiver: WebhookReceiver): Promise<void> {
  expectStatus(await signedBalance(gateway.api.baseUrl, merchant), 200);
  // The merchant's client of this gateway's API process.
  const client = gateway.operator.clientsOf(merchant.accountId, merchant.project, merchant.keys).test;
  const invoiceId = await paidInvoice(gateway.operator, client, '100.00');
  await receiver.waitFor((r) => r.some((w) => w.body?.data?.invoice?.id === invoiceId), `the webhook of ${invoiceId}`);
  expect(
    validSignature(
      receiver.received.find((w) => w.body?.data?.invoice?.id === invoiceId)!,
      merchant.project.webhookSecret,
    ),
  ).toBe(true);
}

/** The key ids every stored webhook secret is sealed with. */
async function sealingKeyIds(url: string): Promise<string[]> {
  const client = new PgClient({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ key_id: string }>(`SELECT DISTINCT split_part(webhook_secret, ':', 3) AS key_id FROM projects ORDER BY 1`)).rows.map(
      (r) => r.key_id,
    );
  } finally {
    await client.end();
  }
}

/** The audit signing keys whose private half is sealed in the database, and the key id of the secrets key sealing each. */
async function sealedSigningKeys(url: string): Promise<{ kid: string; key_id: string }[]> {
  const client = new PgClient({ connectionString: url });
  await client.connect();
  try {
    return (
      await client.query<{ kid: string; key_id: string }>(
        `SELECT kid, split_part(sealed_private_key, ':', 3) AS key_id FROM audit_signing_keys WHERE sealed_private_key IS NOT NULL ORDER BY kid`,
      )
    ).rows;
  } finally {
    await client.end();
  }
}

describe('runbook: a leaked secrets key, the key file (no SECRETS_KEY)', () => {
  const data = temporaryDataDir();
  const keyFile = path.join(data.dir, 'secrets.key');
  const keysInFile = () => readFileSync(keyFile, 'utf8').trim().split('\n');
  let receiver: WebhookReceiver;
  let gateway: Deployment;
  let restarted: RunningProcess | null = null;

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    // The embedded server under DATA_DIR, whose secrets.key is the key; the receiver listens on 127.0.0.1.
    gateway = await startDeployment({ DATA_DIR: data.dir, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  });
  afterAll(async () => {
    await restarted?.kill();
    await gateway?.stop();
    await receiver?.close();
    data.remove();
  });

  it('secrets:rotate-key twice with the gateway’s DATA_DIR: every secret under the new key, the leaked one gone, every process goes on', async () => {
    expect(after(RUNBOOK, '**Key file**')).toMatch(/^\*\*Key file\*\* \(no `SECRETS_KEY`\): run the command \*\*twice\*\* with the gateway's\s+`DATA_DIR`/);
    const shop = await gateway.operator.merchant({ webhookUrl: receiver.url } as never);
    await expectSecretsWork(gateway, shop, receiver);
    const [leaked] = keysInFile();
    const leakedId = keyIdOf(Buffer.from(leaked!, 'hex'));
    expect(await sealingKeyIds(embeddedDatabaseUrl(data.dir))).toEqual([leakedId]);
    // Two open payment pages: their form tokens are made with the leaked key.
    const formTokens = await Promise.all([0, 1].map(() => openPaymentPage(gateway, shop)));

    const rotate = inlineCode(RUNBOOK, 'npm run secrets:rotate-key');
    const first = await runPrintedOk(rotate, { DATA_DIR: data.dir });
    const second = await runPrintedOk(rotate, { DATA_DIR: data.dir });
    const [current, previous] = keysInFile();
    const currentId = keyIdOf(Buffer.from(current!, 'hex'));
    expect(second).toContain(`new key ${currentId}`);
    expect(first).toContain(`new key ${keyIdOf(Buffer.from(previous!, 'hex'))}`);
    // Its advice is the runbook's: the key kept as long as the backups, apart from them.
    expect(second).toContain('apart from the database backups');
    // The leaked key is gone from the file, and nothing stored is sealed with it.
    expect(keysInFile()).toHaveLength(2);
    expect(keysInFile()).not.toContain(leaked);
    expect(await sealingKeyIds(embeddedDatabaseUrl(data.dir))).toEqual([currentId]);

    // The running processes followed the file: requests and webhooks as before, new secrets under the new key.
    await expectSecretsWork(gateway, shop, receiver);
    const later = await gateway.operator.merchant({ webhookUrl: receiver.url } as never);
    await expectSecretsWork(gateway, later, receiver);
    expect(await sealingKeyIds(embeddedDatabaseUrl(data.dir))).toEqual([currentId]);
    // 3. A form token made with the leaked key is refused once the key is gone (the buyer reloads the page).
    expect((await choose(gateway, formTokens[0]!)).status).toBe(403);
    expect((await choose(gateway, await openPaymentPage(gateway, shop))).status).toBe(303);
    // A process started now holds every key the secrets need.
    await gateway.projector.kill();
    restarted = startProcess('projector', { DATA_DIR: data.dir, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', PUBLIC_URL: PROJECTOR_PUBLIC_URL });
    await restarted.waitForOutput(/running \d+ projections/);
    const invoiceId = await paidInvoice(gateway.operator, shop.test, '100.00');
    await receiver.waitFor((r) => r.some((w) => w.body?.data?.invoice?.id === invoiceId), 'a webhook sent by the restarted projector');
  });
});

/** An open payment page of a new test invoice (no method chosen yet): its invoice and the form token it carries. */
async function openPaymentPage(gateway: Deployment, m: Merchant): Promise<{ invoiceId: string; formToken: string }> {
  const created = await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('page') });
  expectStatus(created, 201);
  const html = await (await fetch(`${gateway.api.baseUrl}/pay/${created.body.id}`)).text();
  const token = /name="formToken" value="([^"]+)"/.exec(html);
  if (!token) throw new Error(`no form token on the payment page:\n${html}`);
  return { invoiceId: created.body.id, formToken: token[1]! };
}

/** The buyer chooses a method on that page: a form POST with its token and no Origin (a browser under no-referrer). */
async function choose(gateway: Deployment, page: { invoiceId: string; formToken: string }): Promise<Response> {
  return fetch(`${gateway.api.baseUrl}/pay/${page.invoiceId}/method`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ method: 'sbp', formToken: page.formToken }).toString(),
  });
}

describe('runbook: a leaked secrets key, SECRETS_KEY', () => {
  let db: TestDatabase;
  let receiver: WebhookReceiver;
  let gateway: Deployment | null = null;
  const leaked = randomBytes(32).toString('base64');
  // The new key as the runbook has it made (`openssl rand -base64 32`).
  const printedKeyCommand = inlineCode(after(RUNBOOK, '**`SECRETS_KEY`**'), 'openssl rand');
  const fresh = execSync(printedKeyCommand, { encoding: 'utf8' }).trim();
  const idOf = (key: string) => keyIdOf(Buffer.from(key, 'base64'));

  const start = async (secretsKey: string) =>
    // The receiver listens on 127.0.0.1.
    startDeployment({ DATABASE_URL: db.url, SECRETS_KEY: secretsKey, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  const refusesToStart = async (secretsKey: string): Promise<string> => {
    const api = startProcess('api', { DATABASE_URL: db.url, SECRETS_KEY: secretsKey, PORT: '0' });
    expect(await api.exited).toBe(1);
    return api.output();
  };

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await gateway?.stop();
    await receiver?.close();
    await db?.drop();
  });

  it('new,old on every process, the command, then new alone; then step 2: the leaked key opens nothing, the known secrets sign nothing', async () => {
    expect(after(RUNBOOK, '**`SECRETS_KEY`**')).toMatch(/set\s+`SECRETS_KEY=<new>,<old>` on every process/);
    expect({ printedKeyCommand, bytes: Buffer.from(fresh, 'base64').length }).toEqual({ printedKeyCommand: 'openssl rand -base64 32', bytes: 32 });
    gateway = await start(leaked);
    const shop = await gateway.operator.merchant({ webhookUrl: receiver.url } as never);
    await expectSecretsWork(gateway, shop, receiver);
    // On an operator's database the audit signing key is sealed there with the secrets key (made when first listed).
    const leakedSigningKid = (await gateway.apiHttp.get('/v1/audit/keys')).body.keys[0].kid as string;
    expect(await sealedSigningKeys(db.url)).toEqual([{ kid: leakedSigningKid, key_id: idOf(leaked) }]);

    // SECRETS_KEY=<new>,<old> on every process, restarted.
    await gateway.stop();
    gateway = await start(`${fresh},${leaked}`);
    await expectSecretsWork(gateway, shop, receiver);
    // A process with only the new key, started before the command ran, refuses to start.
    expect(await refusesToStart(fresh)).toContain(`sealed with key ${idOf(leaked)}`);
    // The command with the same value.
    const rotated = await runPrintedOk(inlineCode(after(RUNBOOK, '**`SECRETS_KEY`**'), 'npm run secrets:rotate-key'), {
      DATABASE_URL: db.url,
      SECRETS_KEY: `${fresh},${leaked}`,
    });
    expect(rotated).toContain(`sealed again with key ${idOf(fresh)}`);
    expect(await sealingKeyIds(db.url)).toEqual([idOf(fresh)]);
    await expectSecretsWork(gateway, shop, receiver);

    // Then SECRETS_KEY=<new> everywhere, restarted.
    await gateway.stop();
    gateway = await start(fresh);
    await expectSecretsWork(gateway, shop, receiver);
    expect((await gateway.operator.http.get(`/admin/v1/projects/${shop.projectId}`)).body.webhookSecret).toBe(shop.project.webhookSecret);
    // The leaked key alone opens nothing any more: a process with it refuses to start.
    expect(await refusesToStart(leaked)).toContain(`sealed with key ${idOf(fresh)}`);
    // The signing key was sealed again with the new key, but a copy of the database sealed with the leaked one opens it.
    expect(await sealedSigningKeys(db.url)).toEqual([{ kid: leakedSigningKid, key_id: idOf(fresh) }]);

    // 2. The database leaked with the key: every project's webhook secret changed (the call of "A key leak"), and the
    // audit signing key sealed there rotated with the command the step prints, run like the others (SECRETS_KEY=<new>).
    const step2 = after(RUNBOOK, '2. **If the database or a backup may have leaked with the key**');
    const call = inlineCode(docSection('A key leak'), 'POST /admin/v1/projects/{id}/webhook-secret');
    const known = shop.project.webhookSecret;
    for (const { id } of (await db.pool.query<{ id: string }>('SELECT id FROM projects')).rows) {
      const newSecret = await operatorCall(gateway, call, { '{id}': id });
      expectStatus(newSecret, 201);
      if (id === shop.projectId) shop.project.webhookSecret = newSecret.body.webhookSecret;
    }
    expect(shop.project.webhookSecret).not.toBe(known);
    const command = inlineCode(step2, 'npm run ');
    expect(command).toBe('npm run audit:rotate-signing-key');
    const signingRotated = await runPrintedOk(inlineCode(step2, 'npm run audit:rotate-signing-key'), { DATABASE_URL: db.url, SECRETS_KEY: fresh });
    expect(signingRotated).toContain(`key ${leakedSigningKid} retired`);

    // The known secret signs nothing: a request signed with it is refused, webhooks carry the new one.
    const withKnown = await sendSigned(gateway.api.baseUrl, {
      method: 'GET',
      path: '/v1/balance',
      publicId: shop.keys.test.publicKey,
      secret: known,
      timestamp: LOADED_AT_SECOND - signed++,
    });
    expect({ status: withKnown.status, code: withKnown.body?.error?.code }).toEqual({ status: 401, code: 'signature_invalid' });
    await expectSecretsWork(gateway, shop, receiver);
    // The leaked signing key is retired (its private half gone from the database) and signs nothing more; the new one
    // is sealed with the new secrets key and signs the checkpoints.
    const listed = (await gateway.apiHttp.get('/v1/audit/keys')).body.keys as { kid: string; validUntil: string | null }[];
    const current = listed.find((k) => k.validUntil === null)!;
    expect(listed.find((k) => k.kid === leakedSigningKid)?.validUntil).toEqual(expect.any(String));
    expect(await sealedSigningKeys(db.url)).toEqual([{ kid: current.kid, key_id: idOf(fresh) }]);
    expect((await gateway.operator.http.get('/admin/v1/audit/checkpoint')).body.kid).toBe(current.kid);
  });
});

describe('runbook: a leaked secrets key, with a stored secret that does not open', () => {
  let db: TestDatabase;
  const data = temporaryDataDir();
  const keyFile = path.join(data.dir, 'secrets.key');
  let gateway: RunningGateway | null = null;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
  });
  afterAll(async () => {
    await gateway?.kill();
    await db?.drop();
    data.remove();
  });

  it('secrets:rotate-key changes nothing, naming each project and the rotate call; after the call it rotates', async () => {
    // The choice the runbook prints.
    expect(after(RUNBOOK, '**Seal everything with a new key**')).toMatch(/does not open, it changes\s+nothing \(exit 1\) and names each\s+such project/);
    // ADMIN_TOKEN: the test makes the runbook's rotate calls with it.
    const env = { DATABASE_URL: db.url, DATA_DIR: data.dir, ADMIN_TOKEN };
    gateway = await startGateway('api', env);
    const operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    const [shop, misplaced, foreign] = [await operator.merchant(), await operator.merchant(), await operator.merchant()];
    // Sealed for another project (its value copied into this row): the command's own check names it.
    await db.pool.query('UPDATE projects SET webhook_secret = (SELECT webhook_secret FROM projects WHERE id = $2) WHERE id = $1', [
      misplaced.projectId,
      shop.projectId,
    ]);
    const stored = async () => (await db.pool.query('SELECT id, webhook_secret FROM projects ORDER BY id')).rows;
    const unchanged = async (before: { file: string; secrets: unknown }) => {
      expect(readFileSync(keyFile, 'utf8')).toBe(before.file);
      expect(await stored()).toEqual(before.secrets);
    };
    let before = { file: readFileSync(keyFile, 'utf8'), secrets: await stored() };
    const printed = inlineCode(RUNBOOK, 'npm run secrets:rotate-key');
    const refused = await runPrinted(printed, env);
    expect(refused.code).toBe(1);
    expect(refused.output).toContain(`the webhook secret of project ${misplaced.projectId} does not open`);
    expect(refused.output).toContain(`POST /admin/v1/projects/${misplaced.projectId}/webhook-secret/rotate`);
    expect(refused.output).not.toContain(`project ${shop.projectId} does not open`);
    await unchanged(before);

    // Sealed with a key no process holds (another DATA_DIR's): no process starts on it, the command neither (naming the key).
    const strayBox = new SecretBox(fixedKeys([randomBytes(32)]));
    const stray = strayBox.seal(`whsec_${randomBytes(24).toString('base64url')}`, webhookSecretOwner(foreign.projectId));
    await db.pool.query('UPDATE projects SET webhook_secret = $2 WHERE id = $1', [foreign.projectId, stray]);
    before = { file: readFileSync(keyFile, 'utf8'), secrets: await stored() };
    const notStarted = await runPrinted(printed, env);
    // A key the process was not given is its configuration: exit 2, as the runbook says.
    expect(notStarted.code).toBe(2);
    expect(notStarted.output).toContain(`sealed with key ${strayBox.currentKeyId}, which this process does not hold`);
    await unchanged(before);

    // The way out: the call for each (on the process started before them), then the command.
    for (const m of [misplaced, foreign]) expectStatus(await operator.http.post(`/admin/v1/projects/${m.projectId}/webhook-secret/rotate`), 201);
    const rotated = await runPrintedOk(printed, env);
    const current = keyIdOf(Buffer.from(readFileSync(keyFile, 'utf8').trim().split('\n')[0]!, 'hex'));
    expect(rotated).toContain(`new key ${current}`);
    expect(await sealingKeyIds(db.url)).toEqual([current]);
    expectStatus(await signedBalance(gateway.baseUrl, shop), 200);
  });
});
