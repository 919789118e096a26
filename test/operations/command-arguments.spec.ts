/**
 * The operator commands that take no arguments refuse any, before they read or write
 * anything: `npm run secrets:rotate-key -- --dry-run` rotated the key, and
 * `npm run ledger:verify -- --asOf …` verified everything and said nothing of the
 * option. Each runs as the operator runs it, on a migrated database. The commands
 * that work on the gateway's data refuse a DATA_DIR that holds none. A command that
 * cannot reach its database could not run: exit 2, as for the others, in one line.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startProcess, type Entry } from '../support/gateway-process';
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
  it.each<[Entry, string]>([
    ['rebuild', 'projections:rebuild: '],
    ['secrets-rotate-key', 'secrets:rotate-key failed: '],
    ['audit-rotate-signing-key', 'audit:rotate-signing-key failed: '],
  ])('%s on a DATA_DIR without the gateway’s database: exit 2 saying so, nothing made there', async (entry, prefix) => {
    const wrong = path.join(dataDir, `not-the-gateway-${entry}`);
    const proc = startProcess(entry, { DATA_DIR: wrong });
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
