/**
 * The runbook "Restoring from a backup" of docs/operations.md, executed (issue 33), on
 * the embedded server (DATA_DIR) with an API process and a projector process apart:
 * a history (payments, a payout, a refund still pending), every process stopped, the
 * checksums taken, the server found stopped, DATA_DIR copied with `cp -a`; after the
 * backup point a key rotation, a payout, an invoice and a checkpoint recorded off-site
 * with the keys then published. The copy is then restored: its checksums equal those of
 * the backup before the gateway starts on it (after, the refund completes and they
 * differ), the server is past the log (the runbook's query), every projection is live
 * with lag 0 and ledger:verify exits 0; of step 6, the checkpoint fails log:verify (its
 * key is gone; with the saved keys, the log it names), the old key works again until
 * rotated again, the payout sequence is moved past the lost id with the printed setval, a
 * payout's orderId first used after the backup makes a new payout, and a repeated orderId gets its invoice
 * id. A database whose server is behind its log's transaction ids (what a logical
 * restore gives) is refused at start by the processes and commands that write (exit 1)
 * and by the read-only commands (the verifiers here: exit 2). The EventStoreDB part cannot run here (no EventStoreDB
 * server on the build machines) but for its setval statement, plain SQL, run as printed.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { PostgresEventStore } from '#event-store';
import { EMBEDDED_DATABASE_NAME } from '#platform/database';
import { Entry, RunningGateway, startGateway, startProcess, temporaryDataDir } from '../../support/gateway-process';
import { api, expectStatus, Operator, orderId, poll } from '../../support/merchant-fixtures';
import { fund, paidInvoice, payoutAddress, PHONE } from '../../support/money-out-fixtures';
import {
  after,
  checksumLines,
  Deployment,
  docSection,
  embeddedDatabaseUrl,
  everyProjectionLive,
  fencedBlock,
  fill,
  inlineCode,
  runPrinted,
  runPrintedOk,
  startDeployment,
} from '../../support/runbooks';
import { startPrivatePostgres } from '../../support/private-postgres';
import { createTestDatabase } from '../../support/test-database';

jest.setTimeout(180_000);

const RUNBOOK = docSection('Restoring from a backup');
const SAFE_SQL = fencedBlock(after(RUNBOOK, '3. '), 'sql');
/** Where `phrase` first stands in `text`, line breaks read as spaces; it must stand there. */
function placeOf(text: string, phrase: string): number {
  const at = text.replace(/\s+/g, ' ').indexOf(phrase);
  if (at < 0) throw new Error(`the runbook text has no "${phrase}"`);
  return at;
}

/** A refund made just before the backup is still pending at it (CLOCK=manual: due when the test moves the clock). */
const REFUND_PROCESSING_SECONDS = 60;

async function query<T extends Record<string, unknown>>(url: string, sql: string): Promise<T[]> {
  const client = new PgClient({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

describe('runbook: restoring from a backup (the embedded server under DATA_DIR)', () => {
  const data = temporaryDataDir();
  const restored = temporaryDataDir();
  /** Where the operator keeps what must outlive a restore: a checkpoint and the published keys. */
  const offSite = mkdtempSync(path.join(tmpdir(), 'off-site-'));
  let gateway: Deployment | null = null;
  let alone: RunningGateway | null = null;

  afterAll(async () => {
    await alone?.kill();
    await gateway?.stop();
    data.remove();
    restored.remove();
    rmSync(offSite, { recursive: true, force: true });
  });

  it('a physical copy of the stopped DATA_DIR restores: past the log, live, verified, the same checksums; what came after the backup is gone', async () => {
    // The manual clock, so that a refund pending at the backup comes due only after the restore, when the test moves it.
    const env = { DATA_DIR: data.dir, CLOCK: 'manual', REFUND_PROCESSING_SECONDS: String(REFUND_PROCESSING_SECONDS) };
    gateway = await startDeployment(env);
    const { operator } = gateway;
    const shop = await operator.merchant({ holdHours: 0 });
    await fund(operator, shop, 'live', ['3000.00', '2000.00']);
    const address = await payoutAddress(operator, shop.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк' });
    const payout = await shop.live.post('/v1/payouts', { amount: '500.00', addressId: address.id, orderId: orderId('payout') });
    expectStatus(payout, 201);
    const refunded = await paidInvoice(operator, shop.live, '1000.00');
    const refund = await shop.live.post(`/v1/invoices/${refunded}/refund`, { amount: '400.00' });
    expectStatus(refund, 202);
    await everyProjectionLive(gateway);

    // Take the backup: every process stopped, then the checksums, the server stopped, DATA_DIR copied with owners and modes.
    const backupSteps = after(RUNBOOK, '**Take a physical backup.**');
    expect(placeOf(backupSteps, 'stop every gateway process')).toBeLessThan(placeOf(backupSteps, 'read-models:checksum'));
    await gateway.stop();
    gateway = null;
    const CHECKSUM = inlineCode(backupSteps, 'npm run read-models:checksum');
    const checksums = checksumLines(await runPrintedOk(CHECKSUM, { DATA_DIR: data.dir }));
    expect(checksums.length).toBeGreaterThan(5);
    expect(existsSync(path.join(data.dir, 'postgres', 'postmaster.pid'))).toBe(false);
    expect(inlineCode(RUNBOOK, 'cp ')).toBe('cp -a');
    const copy = spawnSync('cp', ['-a', `${data.dir}/.`, restored.dir], { encoding: 'utf8' });
    expect(copy.stderr).toBe('');

    // After the backup point, on the original: the live key rotated, a payout, an invoice.
    alone = await startGateway('api', env);
    const laterOperator = new Operator(alone.baseUrl, alone.adminToken);
    const rotated = await laterOperator.http.post(`/admin/v1/projects/${shop.projectId}/keys/rotate`, { mode: 'live' });
    expectStatus(rotated, 201);
    const rotatedLive = api(alone.baseUrl, rotated.body.secretKey);
    const webhookSecret = (await laterOperator.http.get(`/admin/v1/projects/${shop.projectId}`)).body.webhookSecret as string;
    const rotatedSecret = await laterOperator.http.post(`/admin/v1/projects/${shop.projectId}/webhook-secret/rotate`);
    expectStatus(rotatedSecret, 201);
    expect((await laterOperator.http.get(`/admin/v1/projects/${shop.projectId}`)).body.webhookSecret).not.toBe(webhookSecret);
    const lostOrder = orderId('lost');
    const lost = await rotatedLive.post('/v1/payouts', { amount: '100.00', addressId: address.id, orderId: lostOrder });
    expectStatus(lost, 201);
    expect(Number(lost.body.id)).toBe(Number(payout.body.id) + 1);
    const retriedOrder = orderId('retried');
    const invoiceAfter = await rotatedLive.post('/v1/invoices', { amount: '700.00', orderId: retriedOrder, method: 'sbp' });
    expectStatus(invoiceAfter, 201);
    // A checkpoint recorded off-site after the backup point, and the keys published then (its key made for it).
    const checkpoint = await laterOperator.http.get('/admin/v1/audit/checkpoint');
    expectStatus(checkpoint, 200);
    const keys = await api(alone.baseUrl).get('/v1/audit/keys');
    expectStatus(keys, 200);
    const checkpointFile = path.join(offSite, 'checkpoint.json');
    const keysFile = path.join(offSite, 'keys.json');
    writeFileSync(checkpointFile, JSON.stringify(checkpoint.body));
    writeFileSync(keysFile, JSON.stringify(keys.body));
    await alone.kill();
    alone = null;

    // 1-2. Everything stopped; DATA_DIR points at the restored copy.
    // 3. Before anything starts on it, the runbook's query on its server says it is past every stored event (review 67:
    // it ran after the gateway had started and written, where it always holds).
    const server = await startPrivatePostgres(restored.dir, { databaseName: EMBEDDED_DATABASE_NAME });
    try {
      expect(await query(server.url, SAFE_SQL)).toEqual([{ safe: true }]);
    } finally {
      await server.stop();
    }
    // 4. Its checksums, before the gateway starts on it, are the backup's.
    const restoreSteps = after(RUNBOOK, '**Restore (PostgreSQL event store).**');
    expect(placeOf(restoreSteps, 'read-models:checksum')).toBeLessThan(placeOf(restoreSteps, 'Start the gateway'));
    expect(checksumLines(await runPrintedOk(CHECKSUM, { DATA_DIR: restored.dir }))).toEqual(checksums);
    // 5. The gateway starts with its key file.
    gateway = await startDeployment({ ...env, DATA_DIR: restored.dir });
    await everyProjectionLive(gateway);
    expect(await runPrintedOk(inlineCode(restoreSteps, 'npm run ledger:verify'), { DATA_DIR: restored.dir })).toContain('OK: every entry balances');
    // Why step 4 comes first: the restore comes after the refund pending at the backup fell due, and the gateway completes it.
    const oldLive = api(gateway.api.baseUrl, shop.keys.live.secretKey);
    await gateway.operator.advance(REFUND_PROCESSING_SECONDS + 1);
    await poll(
      async () => (await oldLive.get(`/v1/refunds/${refund.body.id}`)).body,
      (r) => r.status === 'succeeded',
      'the refund pending at the backup to succeed',
    );
    await everyProjectionLive(gateway);
    expect(checksumLines(await runPrintedOk(CHECKSUM, { DATA_DIR: restored.dir }))).not.toEqual(checksums);

    // 6. The checkpoint naming a position past the backup point no longer verifies: its key is gone with the restore,
    // and with the saved keys its signature holds but the log it names is not there: cut, or rewritten where new
    // events took its positions again.
    const [keyGoneBefore, keyGoneAfter] = inlineCode(RUNBOOK, 'no public key with kid').split('…');
    expect(inlineCode(RUNBOOK, 'log:verify --checkpoint')).toBe('log:verify --checkpoint');
    const withoutKeys = await runPrinted(`npm run log:verify -- --checkpoint ${checkpointFile}`, { DATA_DIR: restored.dir });
    expect(withoutKeys.code).toBe(1);
    expect(withoutKeys.output).toContain(`FAILED: ${checkpointFile}: ${keyGoneBefore}${checkpoint.body.kid}${keyGoneAfter}`);
    const withKeys = await runPrinted(`npm run log:verify -- --checkpoint ${checkpointFile} --keys ${keysFile}`, { DATA_DIR: restored.dir });
    expect(withKeys.code).toBe(1);
    expect(withKeys.output).toContain(`signature holds under key ${checkpoint.body.kid}`);
    expect(withKeys.output).toMatch(new RegExp(`FAILED: (the off-site checkpoint )?at position ${checkpoint.body.position} `));

    // The key rotated after the backup point is undone: the old key works again, until rotated again.
    const now = gateway.operator;
    expectStatus(await oldLive.get('/v1/balance'), 200);
    expect((await api(gateway.api.baseUrl, rotated.body.secretKey).get('/v1/balance')).status).toBe(401);
    const again = await now.http.post(`/admin/v1/projects/${shop.projectId}/keys/rotate`, { mode: 'live' });
    expectStatus(again, 201);
    expect((await oldLive.get('/v1/balance')).status).toBe(401);
    const live = api(gateway.api.baseUrl, again.body.secretKey);
    // So is the webhook secret rotated after it: the old one signs again, until rotated again.
    expect((await now.http.get(`/admin/v1/projects/${shop.projectId}`)).body.webhookSecret).toBe(webhookSecret);
    const secretAgain = await now.http.post(`/admin/v1/projects/${shop.projectId}/webhook-secret/rotate`);
    expectStatus(secretAgain, 201);
    expect((await now.http.get(`/admin/v1/projects/${shop.projectId}`)).body.webhookSecret).not.toBe(webhookSecret);
    // The EventStoreDB restore's statement is plain SQL over the sequence and the stream catalog, run here as printed:
    // from a sequence as new (its next id the first payout's), it moves the sequence past the last payout of the log.
    const url = embeddedDatabaseUrl(restored.dir);
    // The runbooks' way into the embedded server, printed above them (psql; `data` is the DATA_DIR).
    const psql = fill(fencedBlock(docSection('Runbooks'), 'sh'), { 'data/': `${restored.dir}/` });
    // -w: a password the line did not give is a failure here, not a prompt that waits. PGSSLMODE=require, as in the
    // shell of an operator who also uses a cloud PostgreSQL: the embedded server has no TLS, and the line says so.
    const counted = spawnSync('bash', ['-c', `${psql} -w -tAc 'SELECT count(*) FROM events'`], {
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, PGSSLMODE: 'require' },
    });
    expect({ status: counted.status, stderr: counted.status === 0 ? '' : counted.stderr }).toEqual({ status: 0, stderr: '' });
    expect(Number(counted.stdout.trim())).toBe(Number((await query<{ n: string }>(url, 'SELECT count(*) AS n FROM events'))[0]!.n));
    await query(url, "SELECT setval('payout_ids', 1, false)");
    await query(url, fencedBlock(after(RUNBOOK, '**With EventStoreDB**'), 'sql'));
    const lastPayoutSql = "SELECT max(substring(stream_name FROM 8)::int) AS id FROM events WHERE stream_name LIKE 'payout-%'";
    const [lastPayout] = await query<{ id: number }>(url, lastPayoutSql);
    expect(lastPayout!.id).toBeLessThan(Number(lost.body.id));
    expect(await query(url, 'SELECT last_value::int, is_called FROM payout_ids')).toEqual([{ last_value: lastPayout!.id, is_called: true }]);
    // The payout id handed out after the backup point: the sequence moved past it, as printed.
    const setval = fill(inlineCode(RUNBOOK, "SELECT setval('payout_ids', <id>)"), { '<id>': lost.body.id });
    await query(url, setval);
    const next = await live.post('/v1/payouts', { amount: '100.00', addressId: address.id, orderId: orderId('next') });
    expectStatus(next, 201);
    expect(Number(next.body.id)).toBe(Number(lost.body.id) + 1);
    // A payout requested again with the orderId first used after the backup point is a new payout (its claim is gone).
    expect(placeOf(RUNBOOK, 'first used after it is a new payout')).toBeGreaterThan(0);
    const repeated = await live.post('/v1/payouts', { amount: '100.00', addressId: address.id, orderId: lostOrder });
    expectStatus(repeated, 201);
    expect(Number(repeated.body.id)).toBe(Number(next.body.id) + 1);
    // A merchant repeating the invoice of the same orderId gets the same invoice id.
    const retried = await live.post('/v1/invoices', { amount: '700.00', orderId: retriedOrder, method: 'sbp' });
    expectStatus(retried, 201);
    expect(retried.body.id).toBe(invoiceAfter.body.id);
  });
});

describe('runbook: restoring from a backup, a server behind the event log', () => {
  it('is refused at start by a process that writes and by the verifiers, and the runbook’s query says it is not safe', async () => {
    const db = await createTestDatabase({ poolSize: 2 });
    const store = new PostgresEventStore(db.pool);
    try {
      await store.appendToStream(`probe-${randomUUID()}`, [{ id: randomUUID(), type: 'Probed', data: {} }]);
      // What a logical dump restored into a new server gives: events written by transactions the server has not reached.
      await db.pool.query(`UPDATE events SET transaction_id = (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000)::text::xid8`);
      expect((await db.pool.query(SAFE_SQL)).rows).toEqual([{ safe: false }]);
      const api = startProcess('api', { DATABASE_URL: db.url, PORT: '0' });
      try {
        const outcome = await Promise.race([
          api.exited,
          api.waitForOutput(/listening on/).then(
            () => 'listening',
            () => 'exited',
          ),
        ]);
        expect(outcome).toBe(1);
        expect(api.output()).toContain('The gateway could not start: the database server is behind its event log');
      } finally {
        await api.kill();
      }
      // The commands that write, as step 3 names them (exit 1), before they write anything.
      const writers: [Entry, string[]][] = [
        ['rebuild', []],
        ['seed-load', ['--events', '100']],
        ['secrets-rotate-key', []],
        ['audit-rotate-signing-key', []],
      ];
      for (const [command, args] of writers) {
        const writer = startProcess(command, { DATABASE_URL: db.url, SECRETS_KEY: randomBytes(32).toString('hex') }, args);
        expect({ command, code: await writer.exited }).toEqual({ command, code: 1 });
        expect(writer.output()).toContain('the database server is behind its event log');
      }
      expect((await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM events')).rows).toEqual([{ n: 1 }]);
      // The read-only commands too: they read the log below the server's horizon, which is none of it (no false OK).
      for (const command of ['log-verify', 'ledger-verify'] as const) {
        const verify = startProcess(command, { DATABASE_URL: db.url });
        expect(await verify.exited).toBe(2);
        expect(verify.output()).toContain('the database server is behind its event log');
      }
    } finally {
      await store.close();
      await db.drop();
    }
  });
});
