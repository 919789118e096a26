/**
 * The operator commands that take no arguments refuse any, before they read or write
 * anything: `npm run secrets:rotate-key -- --dry-run` rotated the key, and
 * `npm run ledger:verify -- --asOf …` verified everything and said nothing of the
 * option. Each runs as the operator runs it, on a migrated database. The commands
 * that work on the gateway's data refuse a DATA_DIR that holds none. A command that
 * cannot reach its database could not run: exit 2, as for the others, in one line.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RunningGateway, startGateway, startProcess, temporaryDataDir, type Entry } from '../support/gateway-process';
import { ADMIN_TOKEN, Operator } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';

describe('commands without arguments refuse any, and do nothing', () => {
  let db: TestDatabase;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'command-arguments-'));

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
  });

  afterAll(async () => {
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const signingKeys = async () => (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_signing_keys')).rows[0]!.n;

  it.each<[Entry, string, Record<string, string>]>([
    ['ledger-verify', 'ledger:verify', {}],
    // No SECRETS_KEY: the key file under DATA_DIR, which a rotation would write.
    ['secrets-rotate-key', 'secrets:rotate-key', { DATA_DIR: dataDir }],
    // The signing key sealed in the database, which a rotation would insert.
    ['audit-rotate-signing-key', 'audit:rotate-signing-key', { SECRETS_KEY: randomBytes(32).toString('hex') }],
  ])('%s -- --dry-run: exit 2 naming the argument, nothing written', async (entry, command, env) => {
    const keysBefore = await signingKeys();
    const proc = startProcess(entry, { DATABASE_URL: db.url, ...env }, ['--dry-run']);
    const code = await proc.exited;
    expect({ code, output: proc.output() }).toEqual({
      code: 2,
      output: `${command}: takes no arguments, got --dry-run (its settings are environment variables: docs/configuration.md)\n`,
    });
    expect(existsSync(path.join(dataDir, 'secrets.key'))).toBe(false);
    expect(await signingKeys()).toBe(keysBefore);
  });

  // A DATA_DIR mistyped (or left at ./data) in a runbook: the rotation said it rotated a key that never existed.
  // The read-only commands too (docs/operations.md, read-only commands: "none: exit 2").
  it.each<[Entry, string, string[]?]>([
    ['rebuild', 'projections:rebuild: '],
    ['secrets-rotate-key', 'secrets:rotate-key failed: '],
    ['audit-rotate-signing-key', 'audit:rotate-signing-key failed: '],
    ['ledger-verify', 'ledger:verify failed to run: '],
    ['log-verify', 'log:verify failed to run: '],
    ['read-models-checksum', 'read-models:checksum failed: '],
    ['audit-reconcile', 'audit:reconcile failed: ', ['--from', '2026-01-01T00:00:00Z', '--to', '2026-01-02T00:00:00Z']],
  ])('%s on a DATA_DIR without the gateway’s database: exit 2 saying so, nothing made there', async (entry, prefix, args = []) => {
    const wrong = path.join(dataDir, `not-the-gateway-${entry}`);
    const proc = startProcess(entry, { DATA_DIR: wrong }, args);
    const code = await proc.exited;
    expect({ code, output: proc.output() }).toEqual({
      code: 2,
      output: `${prefix}no embedded PostgreSQL under ${wrong}/postgres: set DATABASE_URL, or DATA_DIR to the gateway's data folder\n`,
    });
    expect(existsSync(wrong)).toBe(false);
  });

  // `new Date` read 2031-02-30 as 2 March, and an instant before year 0000 in UTC gave events the API cannot echo back.
  it.each(['2031-02-30T00:00:00Z', '0000-01-01T00:00:00+03:00', 'yesterday'])(
    'seed-load --start %s: exit 2 naming the rule, nothing written',
    async (start) => {
      const proc = startProcess('seed-load', { DATABASE_URL: db.url }, ['--events', '100', '--start', start]);
      const code = await proc.exited;
      expect({ code, output: proc.output() }).toEqual({
        code: 2,
        output: expect.stringMatching(/^seed:load: --start takes an ISO 8601 instant of a real date and time in the years 0000\.\.9999 \(UTC\)/),
      });
      expect((await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM events')).rows[0]!.n).toBe(0);
    },
  );

  // The serving processes are configured by the environment: `npm start -- --port 4000` listened on PORT.
  it.each<Entry>(['gateway', 'api', 'projector'])('%s -- --port 4000: exit 2 naming the argument, before it serves', async (entry) => {
    const proc = startProcess(entry, { DATABASE_URL: db.url, SECRETS_KEY: randomBytes(32).toString('hex'), PORT: '0' }, ['--port', '4000']);
    const code = await proc.exited;
    expect({ code, output: proc.output() }).toEqual({
      code: 2,
      output: `${entry}: takes no arguments, got --port 4000 (its settings are environment variables: docs/configuration.md)\n`,
    });
  });
});

// log:verify printed its usage and exited 2; rebuild, read-models:checksum and audit:reconcile said "unknown option --help";
// deploy:check said "unknown argument --help" (exit 2).
describe('--help', () => {
  const dataDir = path.join(tmpdir(), `help-${randomBytes(4).toString('hex')}`);
  it.each<Entry>([
    'gateway',
    'api',
    'projector',
    'rebuild',
    'ledger-verify',
    'log-verify',
    'seed-load',
    'read-models-checksum',
    'secrets-rotate-key',
    'audit-reconcile',
    'audit-rotate-signing-key',
    'deploy-check',
  ])('%s -- --help: its usage on stdout, exit 0, nothing touched', async (entry) => {
    const proc = startProcess(entry, { DATA_DIR: dataDir }, ['--help']);
    const code = await proc.exited;
    expect({ code, output: proc.output() }).toEqual({ code: 0, output: expect.stringMatching(/^usage: /) });
    expect(existsSync(dataDir)).toBe(false);
  });

  it('-h as the value of another option is that value, not help: log:verify -- --checkpoint -h reads a file -h (exit 2, no such file)', async () => {
    const proc = startProcess('log-verify', { DATA_DIR: dataDir }, ['--checkpoint', '-h']);
    expect({ code: await proc.exited, usage: /^usage: /.test(proc.output()) }).toEqual({ code: 2, usage: false });
  });
});

describe('commands whose database cannot be reached', () => {
  /** A port nobody listens on: taken, then closed again. */
  let closedPort: number;
  beforeAll(async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closedPort = (server.address() as { port: number }).port;
    await new Promise((resolve) => server.close(resolve));
  });

  // The writing commands exited 1 ("failed") and seed:load printed a stack: a script could not tell "did not run" from "failed".
  it.each<[Entry, string, string[]]>([
    ['ledger-verify', 'ledger:verify', []],
    ['log-verify', 'log:verify', []],
    ['read-models-checksum', 'read-models:checksum', []],
    ['audit-reconcile', 'audit:reconcile', ['--from', '2026-01-01T00:00:00Z', '--to', '2026-01-02T00:00:00Z']],
    ['rebuild', 'projections:rebuild', []],
    ['secrets-rotate-key', 'secrets:rotate-key', []],
    ['audit-rotate-signing-key', 'audit:rotate-signing-key', []],
    ['seed-load', 'seed:load', ['--events', '100']],
  ])('%s: exit 2 (could not run) in one line naming the refused connection, no stack', async (entry, command, args) => {
    const url = `postgres://gateway:not-printed@127.0.0.1:${closedPort}/gateway`;
    const proc = startProcess(entry, { DATABASE_URL: url, SECRETS_KEY: randomBytes(32).toString('hex') }, args);
    const code = await proc.exited;
    expect({ code, output: proc.output() }).toEqual({
      code: 2,
      output: expect.stringMatching(new RegExp(`^${command}[^\\n]* connect ECONNREFUSED 127\\.0\\.0\\.1:${closedPort}\\n$`)),
    });
    expect(proc.output()).not.toContain('not-printed');
  });
});

// The gateway on DATA_DIR with SECRETS_KEY, a project's webhook secret sealed with it; the commands run beside it.
describe('commands on the gateway’s data with a secrets key it does not hold, or with AUDIT_SIGNING_KEY', () => {
  const data = temporaryDataDir();
  const held = randomBytes(32).toString('hex');
  const unrelated = randomBytes(32).toString('hex');
  const signingKeyFile = path.join(data.dir, 'audit-signing.key');
  let gateway: RunningGateway | null = null;
  const listedKeys = async () =>
    ((await (await fetch(`${gateway!.baseUrl}/v1/audit/keys`)).json()) as { keys: { kid: string; validUntil: string | null }[] }).keys;

  beforeAll(async () => {
    gateway = await startGateway('api', { DATA_DIR: data.dir, SECRETS_KEY: held, ADMIN_TOKEN });
    await new Operator(gateway.baseUrl, ADMIN_TOKEN).merchant();
    await listedKeys(); // the key file made and published
  });
  afterAll(async () => {
    await gateway?.kill();
    data.remove();
  });

  // It exited 1 ("failed"), as if it had run: the process was only given the wrong key.
  it('secrets:rotate-key with an unrelated SECRETS_KEY: exit 2 (configuration) naming the keys, nothing changed', async () => {
    const proc = startProcess('secrets-rotate-key', { DATA_DIR: data.dir, SECRETS_KEY: unrelated });
    const code = await proc.exited;
    expect({ code, output: proc.output() }).toEqual({
      code: 2,
      output: expect.stringMatching(
        /^secrets:rotate-key failed: webhook secrets of \d+ project\(s\) are sealed with key [0-9a-f]{8}, which this process does not hold/,
      ),
    });
  });

  // Its job is the signing key in DATA_DIR: it refused (exit 1) for want of the webhook secrets' key, which the runbook does not give it.
  it.each([
    ['without SECRETS_KEY', {}],
    ['with an unrelated SECRETS_KEY', { SECRETS_KEY: unrelated }],
  ])('audit:rotate-signing-key on DATA_DIR %s: rotates the key file (exit 0), no secrets key made', async (_name, env: Record<string, string>) => {
    const before = (await listedKeys()).find((k) => k.validUntil === null)!.kid;
    const proc = startProcess('audit-rotate-signing-key', { DATA_DIR: data.dir, ...env });
    const code = await proc.exited;
    expect({ code, output: proc.output() }).toEqual({
      code: 0,
      output: expect.stringContaining(`key ${before} retired, still listed by GET /v1/audit/keys`),
    });
    const current = (await listedKeys()).find((k) => k.validUntil === null)!.kid;
    expect(proc.output()).toContain(`key ${current} signs from now on (${signingKeyFile})`);
    expect(existsSync(path.join(data.dir, 'secrets.key'))).toBe(false);
  });

  // A refusal for its configuration exited 1 ("failed").
  it('audit:rotate-signing-key with AUDIT_SIGNING_KEY set: exit 2 saying to set a new key there, nothing changed', async () => {
    const keysBefore = await listedKeys();
    const fileBefore = readFileSync(signingKeyFile, 'utf8');
    const pem = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    const proc = startProcess('audit-rotate-signing-key', { DATA_DIR: data.dir, SECRETS_KEY: held, AUDIT_SIGNING_KEY: pem });
    const code = await proc.exited;
    expect({ code, output: proc.output() }).toEqual({
      code: 2,
      output: expect.stringMatching(
        /^audit:rotate-signing-key: AUDIT_SIGNING_KEY is set, .*set a new key there .* on every process and restart them.*Nothing was changed\n$/,
      ),
    });
    expect(await listedKeys()).toEqual(keysBefore);
    expect(readFileSync(signingKeyFile, 'utf8')).toBe(fileBefore);
  });
});
