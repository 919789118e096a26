/**
 * The verify and audit commands as an auditor runs them on another machine: a
 * database role made with the SQL of docs/operations.md ("Read-only commands", each
 * block run as printed by the role it names: the gateway's role, an ordinary login
 * role owning the database that ran the migrations, or a role that may only create
 * roles) that may only SELECT, also from a table the owner makes afterwards as a
 * later migration would (and whose sessions are read-only), no
 * SECRETS_KEY, and a DATA_DIR holding a key other than the gateway's. The history is
 * made through the gateway (invoices paid, refunds pending and failed, a payout paid),
 * then `log:verify`, `ledger:verify`, `audit:reconcile` and `read-models:checksum` run
 * as that role and each exits 0 with its normal report; `log:verify` as that role
 * still finds and names an edited event. `projections:rebuild` (which writes) runs as
 * the owner with a DATA_DIR holding another key. A database missing a migration is
 * named, not migrated. On the embedded server `npm start` runs (owner postgres,
 * database gateway) the doc's SQL runs as printed, and the four commands as that role.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Client, Pool } from 'pg';
import { comparePositions, PostgresEventStore } from '#event-store';
import { allMigrations, loadConfig, openInfrastructure } from '#payments/composition';
import { allProjections, formatChecksums, readModelChecksums } from '#payments/read-models';
import { createLogger } from '#platform/logging';
import { migrate } from '#platform/database';
import { secretsKeyFileOf, writeKeyFile } from '#platform/secrets';
import { RunningGateway, startGateway, startProcess, temporaryDataDir, type Entry } from '../support/gateway-process';
import { ADMIN_TOKEN, expectStatus, Merchant, Operator, orderId, poll } from '../support/merchant-fixtures';
import { fund, payoutAddress, PHONE, transition, waitForBalance } from '../support/money-out-fixtures';
import { visibleHead } from '../support/project-to-head';
import { embeddedDatabaseUrl, makeAuditorRole } from '../support/runbooks';
import { createTestDatabase, databaseUrl, TestDatabase } from '../support/test-database';

/** A data folder whose secrets.key holds a random key: not the gateway's. */
function dataDirWithAnotherKey(): { dir: string; remove(): void } {
  const data = temporaryDataDir();
  writeKeyFile(secretsKeyFileOf(data.dir), [randomBytes(32)]);
  return data;
}

async function asSuperuser(database: string, statements: string): Promise<void> {
  const admin = new Client({ connectionString: databaseUrl(database) });
  await admin.connect();
  try {
    await admin.query(statements);
  } finally {
    await admin.end();
  }
}

/** Waits until every read model's checkpoint is at the head of the log. */
async function readModelsAtHead(pool: Pool): Promise<void> {
  const store = new PostgresEventStore(pool);
  try {
    await poll(
      async () => {
        const head = (await visibleHead(pool, store))!;
        const rows = (
          await pool.query<{ commit_position: string; prepare_position: string }>(
            'SELECT commit_position, prepare_position FROM projection_checkpoints WHERE projection = ANY($1)',
            [allProjections.map((p) => p.name)],
          )
        ).rows;
        return (
          rows.length === allProjections.length &&
          rows.every((r) => comparePositions({ commit: BigInt(r.commit_position), prepare: BigInt(r.prepare_position) }, head) >= 0)
        );
      },
      (caughtUp) => caughtUp,
      'every read model to reach the head of the log',
      60_000,
    );
  } finally {
    await store.close();
  }
}

async function run(entry: Entry, env: Record<string, string>, args: string[] = []): Promise<{ code: number | string; output: string }> {
  const proc = startProcess(entry, env, args);
  const code = await proc.exited;
  return { code, output: proc.output() };
}

describe('the verify and audit commands with a read-only role and no secrets key', () => {
  let db: TestDatabase;
  let gateway: RunningGateway | null = null;
  const gatewayData = temporaryDataDir();
  const auditorData = dataDirWithAnotherKey();
  const role = `auditor_${randomBytes(6).toString('hex')}`;
  const password = randomBytes(18).toString('hex');
  const creator = `creator_${randomBytes(6).toString('hex')}`;
  let auditorUrl: string;
  let merchant: Merchant;

  beforeAll(async () => {
    // The database belongs to an ordinary login role, as a real deployment's does: the gateway and its migrations run as it.
    db = await createTestDatabase({ poolSize: 4, ownerRole: true });
    // A DATA_DIR of its own: the gateway's secrets key must not be the one the commands find under theirs.
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN, DATA_DIR: gatewayData.dir });
    const operator = new Operator(gateway.baseUrl, gateway.adminToken);

    // A history: payments in both modes, a refund failed and one left pending, a payout paid.
    merchant = await operator.merchant({ holdHours: 0 });
    await fund(operator, merchant, 'live', ['3000.00', '2000.00']);
    const test = await merchant.test.post('/v1/invoices', { amount: '700.00', orderId: orderId(), method: 'sbp' });
    expectStatus(test, 201);
    expectStatus(await operator.payment(test.body.id, 'paid'), 200);
    const invoices = (await merchant.live.get('/v1/invoices?limit=10')).body.items as { id: string }[];
    const failed = await merchant.live.post(`/v1/invoices/${invoices[0]!.id}/refund`, { amount: '100.00' });
    expectStatus(failed, 202);
    expectStatus(await operator.http.post(`/admin/v1/refunds/${failed.body.id}/fail`), 200);
    expectStatus(await merchant.live.post(`/v1/invoices/${invoices[1]!.id}/refund`, { amount: '50.00' }), 202);
    const address = await payoutAddress(operator, merchant.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк' });
    const payout = await merchant.live.post('/v1/payouts', { amount: '500.00', addressId: address.id, orderId: orderId('payout') });
    expectStatus(payout, 201);
    for (const step of ['approve', 'process', 'pay']) expectStatus(await transition(operator, payout.body.id, step), 200);
    await waitForBalance(merchant.live, { reserved: '50.00' });

    // Every read model at the head of the log, then the gateway stops: nothing writes while the commands run.
    await readModelsAtHead(db.pool);
    await gateway.kill();
    gateway = null;

    // The auditor's role, made with the SQL docs/operations.md prints (its name, password and database filled in),
    // each block run as the role its text names: the gateway's role (the owner, no superuser) or one that may only
    // create roles. It may log in and read every table, also those later migrations create, nothing else.
    const creatorPassword = randomBytes(18).toString('hex');
    await asSuperuser(db.name, `CREATE ROLE ${creator} LOGIN NOSUPERUSER CREATEROLE PASSWORD '${creatorPassword}'`);
    const creatorUrl = new URL(db.url);
    creatorUrl.username = creator;
    creatorUrl.password = creatorPassword;
    auditorUrl = await makeAuditorRole({ owner: db.url, createrole: creatorUrl.toString() }, role, password);
  }, 180_000);

  afterAll(async () => {
    await gateway?.kill();
    await db?.drop();
    await asSuperuser('postgres', `DROP ROLE IF EXISTS ${role}; DROP ROLE IF EXISTS ${creator}`);
    gatewayData.remove();
    auditorData.remove();
  });

  /** The auditor's environment: the read-only role, no SECRETS_KEY, a DATA_DIR with another key. */
  const auditor = () => ({ DATABASE_URL: auditorUrl, DATA_DIR: auditorData.dir });

  it('the role can read but not write, also a table made later by the owner', async () => {
    await db.pool.query('CREATE TABLE later_migration_probe (id int PRIMARY KEY)');
    const client = new Client({ connectionString: auditorUrl });
    await client.connect();
    try {
      expect(Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n)).toBeGreaterThan(20);
      expect((await client.query('SELECT * FROM later_migration_probe')).rows).toEqual([]);
      await expect(client.query('DELETE FROM events')).rejects.toThrow(/read-only transaction/);
      await expect(client.query('BEGIN READ WRITE; DELETE FROM events')).rejects.toThrow(/permission denied/);
      await client.query('ROLLBACK');
      await expect(client.query('BEGIN READ WRITE; INSERT INTO later_migration_probe VALUES (1)')).rejects.toThrow(/permission denied/);
      await client.query('ROLLBACK');
    } finally {
      await client.end();
      await db.pool.query('DROP TABLE later_migration_probe');
    }
  });

  it('log:verify exits 0 with its report', async () => {
    const r = await run('log-verify', auditor());
    expect(r).toEqual({ code: 0, output: expect.stringContaining('OK: every stream chain recomputes from its events') });
    expect(r.output).toMatch(/event log: \d+ events in \d+ streams/);
  });

  it('ledger:verify exits 0 with its report', async () => {
    const r = await run('ledger-verify', auditor());
    expect(r).toEqual({ code: 0, output: expect.stringContaining('OK: every entry balances') });
    expect(r.output).toMatch(/ledgers: 2, journal entries: \d+/);
    expect(r.output).toContain('OK: every stream chain recomputes from its events');
  });

  it('audit:reconcile exits 0 with its report', async () => {
    // Up to now: a period still to come is not reconciled (exit 2).
    const r = await run('audit-reconcile', auditor(), ['--from', '2000-01-01T00:00:00Z', '--to', new Date().toISOString()]);
    expect(r.code).toBe(0);
    expect(r.output).toMatch(/reconciliation .*: 3 paid invoices, 0 succeeded refunds, 1 paid payouts, \d+ entries; 0 difference\(s\)/);
  });

  // A projections:rebuild killed half-way left its mark and a checkpoint behind; with no projector running, "run it again
  // in a moment" never helped.
  it('audit:reconcile on a read model left mid-rebuild says so and to run projections:rebuild (exit 2)', async () => {
    const saved = (await db.pool.query('SELECT * FROM projection_checkpoints WHERE projection = $1', ['payouts'])).rows[0];
    await db.pool.query(`UPDATE projection_checkpoints SET rebuild_started_at = now(), commit_position = 0, prepare_position = 0 WHERE projection = 'payouts'`);
    try {
      const r = await run('audit-reconcile', auditor(), ['--from', '2000-01-01T00:00:00Z', '--to', new Date().toISOString()]);
      expect(r).toEqual({
        code: 2,
        output: expect.stringMatching(/^audit:reconcile: the read model\(s\) payouts are being rebuilt, .*run npm run projections:rebuild/),
      });
    } finally {
      await db.pool.query('UPDATE projection_checkpoints SET rebuild_started_at = $2, commit_position = $3, prepare_position = $4 WHERE projection = $1', [
        'payouts',
        saved.rebuild_started_at,
        saved.commit_position,
        saved.prepare_position,
      ]);
    }
  });

  it('read-models:checksum exits 0 and prints the checksums the owner computes', async () => {
    const r = await run('read-models-checksum', auditor());
    expect(r.code).toBe(0);
    expect(r.output).toContain(formatChecksums(await readModelChecksums(db.pool)));
  });

  it('creates no key file under a DATA_DIR that has none', async () => {
    const empty = temporaryDataDir();
    try {
      const r = await run('log-verify', { DATABASE_URL: auditorUrl, DATA_DIR: empty.dir });
      expect(r.code).toBe(0);
      expect(existsSync(secretsKeyFileOf(empty.dir))).toBe(false);
    } finally {
      empty.remove();
    }
  });

  it('log:verify as the read-only role finds an edited event and names it', async () => {
    const target = (
      await db.pool.query<{ global_position: string; transaction_id: string; stream_name: string; stream_revision: string; data: string }>(
        `SELECT global_position, transaction_id::text AS transaction_id, stream_name, stream_revision, data::text AS data
         FROM events WHERE stream_name LIKE 'ledger-%' AND stream_revision = 1 ORDER BY global_position LIMIT 1`,
      )
    ).rows[0]!;
    await db.pool.query(`UPDATE events SET data = jsonb_set(data, '{postings,0,amount}', '1') WHERE global_position = $1`, [target.global_position]);
    try {
      const r = await run('log-verify', auditor());
      expect(r.code).toBe(1);
      expect(r.output).toContain(
        `[data_changed] ${target.stream_name} revision ${target.stream_revision} at position ${target.transaction_id}/${target.global_position}`,
      );
    } finally {
      await db.pool.query('UPDATE events SET data = $2::jsonb WHERE global_position = $1', [target.global_position, target.data]);
    }
    expect((await run('log-verify', auditor())).code).toBe(0);
  });

  it('projections:rebuild runs as the owner with a DATA_DIR holding another key', async () => {
    const before = formatChecksums(await readModelChecksums(db.pool));
    const r = await run('rebuild', { DATABASE_URL: db.url, DATA_DIR: auditorData.dir });
    expect(r).toEqual({ code: 0, output: expect.stringContaining('rebuilt ledger:') });
    expect(formatChecksums(await readModelChecksums(db.pool))).toBe(before);
  });

  it('a read-only opening in process refuses writes even as the owner, and names a migration the database lacks', async () => {
    const log = createLogger('read-only-tools-test', 'silent');
    const owner = await openInfrastructure(loadConfig({ DATABASE_URL: db.url, DATA_DIR: auditorData.dir }), log, { access: 'read-only' });
    try {
      await expect(owner.pool.query('CREATE TABLE write_probe ()')).rejects.toThrow(/read-only transaction/);
    } finally {
      await owner.close();
    }

    const behind = await createTestDatabase({ migrate: false, poolSize: 2 });
    try {
      await migrate(behind.pool, allMigrations.slice(0, -1));
      const missing = allMigrations[allMigrations.length - 1]!.id;
      // Every read-only command: exit 2 (could not run), naming the migration.
      for (const command of ['log-verify', 'ledger-verify', 'read-models-checksum'] as const) {
        const r = await run(command, { DATABASE_URL: behind.url, DATA_DIR: auditorData.dir });
        expect({ command, code: r.code, named: r.output.includes(missing) }).toEqual({ command, code: 2, named: true });
      }
      const applied = await behind.pool.query('SELECT 1 FROM migrations_applied WHERE id = $1', [missing]);
      expect(applied.rowCount).toBe(0);
    } finally {
      await behind.drop();
    }
  });
});

describe('the read-only commands as the auditor on the embedded server `npm start` runs', () => {
  const data = temporaryDataDir();
  const auditorData = dataDirWithAnotherKey();
  let gateway: RunningGateway | null = null;
  let auditorUrl: string;

  beforeAll(async () => {
    // The gateway as `npm start` runs it: the embedded server under DATA_DIR, whose owner is postgres.
    gateway = await startGateway('gateway', { DATA_DIR: data.dir, ADMIN_TOKEN });
    const operator = new Operator(gateway.baseUrl, gateway.adminToken);
    const merchant = await operator.merchant({ holdHours: 0 });
    await fund(operator, merchant, 'live', ['1000.00']);
    const url = embeddedDatabaseUrl(data.dir);
    const pool = new Pool({ connectionString: url, max: 2 });
    try {
      await readModelsAtHead(pool);
    } finally {
      await pool.end();
    }
    // The doc's SQL as printed (the role named auditor, as there; only its password filled in), each block as
    // postgres, the superuser and the owner of the database and its tables there; its database is gateway.
    auditorUrl = await makeAuditorRole({ owner: url, createrole: url }, 'auditor', randomBytes(18).toString('hex'));
  }, 180_000);

  afterAll(async () => {
    await gateway?.kill();
    data.remove();
    auditorData.remove();
  });

  it('each command exits 0 with its report, and the role may not write', async () => {
    const auditor = { DATABASE_URL: auditorUrl, DATA_DIR: auditorData.dir };
    expect(await run('log-verify', auditor)).toEqual({ code: 0, output: expect.stringContaining('OK: every stream chain recomputes') });
    expect(await run('ledger-verify', auditor)).toEqual({ code: 0, output: expect.stringContaining('OK: every entry balances') });
    const reconcile = await run('audit-reconcile', auditor, ['--from', '2000-01-01T00:00:00Z', '--to', new Date().toISOString()]);
    expect(reconcile).toEqual({ code: 0, output: expect.stringMatching(/1 paid invoices, .* 0 difference\(s\)/) });
    expect(await run('read-models-checksum', auditor)).toEqual({ code: 0, output: expect.stringMatching(/^invoices\s+1\s+[0-9a-f]{32}$/m) });
    // A table made later by the owner (postgres) is readable; nothing is writable.
    const owner = new Client({ connectionString: embeddedDatabaseUrl(data.dir) });
    const client = new Client({ connectionString: auditorUrl });
    await owner.connect();
    await client.connect();
    try {
      await owner.query('CREATE TABLE later_migration_probe (id int PRIMARY KEY)');
      expect((await client.query('SELECT * FROM later_migration_probe')).rows).toEqual([]);
      await expect(client.query('BEGIN READ WRITE; INSERT INTO later_migration_probe VALUES (1)')).rejects.toThrow(/permission denied/);
      await client.query('ROLLBACK');
    } finally {
      await client.end();
      await owner.query('DROP TABLE IF EXISTS later_migration_probe').finally(() => owner.end());
    }
  });
});
