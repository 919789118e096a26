/**
 * The operator's replay and verify commands load only what they use. Their time is
 * measured against one read of the log (issue 35: `projections:rebuild` within 3× of a
 * binary COPY of the log, `ledger:verify` and `log:verify` within 2×), and at 100,000
 * events that read takes 0.7 s here: loading the HTTP framework, the command bus, the
 * EventStoreDB client and the webhook sender cost each command 0.3–0.5 s at start
 * (docs/benchmarks.md). Each command runs as the operator runs it, on a migrated
 * database, with a hook that lists at exit the packages its main thread loaded.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startProcess, type Entry } from '../support/gateway-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** Packages a serving process needs and these commands do not. */
const NOT_FOR_COMMANDS = ['@nestjs/common', '@nestjs/core', '@nestjs/cqrs', '@eventstore/db-client', 'undici', 'class-validator', 'prom-client'];

/** Written at exit: the packages (node_modules/<name>) whose files the process required. */
const HOOK = `
const { writeFileSync } = require('node:fs');
process.on('exit', () => {
  const names = new Set();
  for (const file of Object.keys(require.cache)) {
    const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(file);
    if (m) names.add(m[1]);
  }
  writeFileSync(process.env.LOADED_PACKAGES_FILE, JSON.stringify([...names].sort()));
});
`;

describe('projections:rebuild, ledger:verify and log:verify at start', () => {
  let db: TestDatabase;
  const dir = mkdtempSync(path.join(tmpdir(), 'command-start-up-'));
  const hook = path.join(dir, 'list-loaded-packages.js');

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    writeFileSync(hook, HOOK);
  });

  afterAll(async () => {
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each<[Entry, RegExp]>([
    ['rebuild', /log events\/s/],
    ['ledger-verify', /OK: every entry balances/],
    ['log-verify', /OK: every stream chain recomputes/],
  ])('%s loads neither the HTTP framework, the command bus, the EventStoreDB client nor the webhook sender', async (entry, report) => {
    const listed = path.join(dir, `${entry}.json`);
    const proc = startProcess(entry, { DATABASE_URL: db.url, NODE_OPTIONS: `--require ${hook}`, LOADED_PACKAGES_FILE: listed });
    const code = await proc.exited;
    expect({ code, output: proc.output() }).toEqual({ code: 0, output: expect.stringMatching(report) });
    const loaded = JSON.parse(readFileSync(listed, 'utf8')) as string[];
    // The hook saw the driver the command does use.
    expect(loaded).toContain('pg');
    expect(loaded.filter((name) => NOT_FOR_COMMANDS.includes(name))).toEqual([]);
  });
});
