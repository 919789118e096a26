/**
 * The start commands and the tools (`npm run ledger:verify`, `log:verify`, `seed:load`, …)
 * build `dist/` first through scripts/build-dist.js, which is `tsc -b` where TypeScript is
 * installed (the production image has none: production-image.spec.ts): it compares the sources
 * with the last build's record (dist/.tsbuildinfo.build) and compiles nothing when the
 * build is up to date (about half a second instead of six for `tsc -p`, see
 * docs/operations.md). The jest set-up built `dist/` the same way just before.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ENTRY_POINTS, scriptOf } from '../support/gateway-process';
import { VERBATIM_COPIES } from '../support/verbatim-copies';

const ROOT = path.resolve(__dirname, '../..');
const scripts: Record<string, string> = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts;

describe('tool commands on an up-to-date build', () => {
  it('every command that runs dist/ builds it first with scripts/build-dist.js, an incremental `tsc -b`', () => {
    expect(scripts.build).toBe('tsc -b tsconfig.build.json');
    const runners = Object.entries(scripts).filter(([, command]) => / dist\//.test(command));
    expect(runners.length).toBeGreaterThan(8);
    for (const [name, command] of runners) {
      const built = command.startsWith('node scripts/build-dist.js && ') || scripts[`pre${name}`] === 'node scripts/build-dist.js';
      expect({ name, built }).toEqual({ name, built: true });
    }
  });

  it('the entry points the tests start are the npm scripts’ own, with their node flags', () => {
    const named = Object.fromEntries(ENTRY_POINTS.map((entry) => [entry, scriptOf(entry)]));
    expect(Object.fromEntries(Object.entries(named).map(([entry, script]) => [entry, script.name]))).toEqual({
      gateway: 'start',
      api: 'start:api',
      projector: 'start:projector',
      rebuild: 'projections:rebuild',
      'ledger-verify': 'ledger:verify',
      'log-verify': 'log:verify',
      'seed-load': 'seed:load',
      'read-models-checksum': 'read-models:checksum',
      'secrets-rotate-key': 'secrets:rotate-key',
      'audit-reconcile': 'audit:reconcile',
      'audit-rotate-signing-key': 'audit:rotate-signing-key',
      'deploy-check': 'deploy:check',
    });
    expect(named['ledger-verify']!.nodeFlags).toEqual(['--max-semi-space-size=4', '--heap-growing-percent=25']);
    expect(named.gateway!.nodeFlags).toEqual([]);
  });

  it('compiles nothing: tsc -b finds the build up to date', () => {
    const run = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-b', 'tsconfig.build.json', '--verbose', '--dry'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/Project '.*tsconfig\.build\.json' is up to date/);
    expect(run.stdout).not.toMatch(/A non-dry build would/);
  });
});

describe('npm run commands as the docs print them', () => {
  /** Every `npm run …` in the Markdown of the repository (code spans and shell blocks), with its file. */
  const printed = (): { file: string; command: string }[] => {
    const files = ['README.md', ...readdirSync(path.join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' }).map((f) => path.join('docs', f))];
    return files
      .filter((file) => file.endsWith('.md'))
      .flatMap((file) =>
        [...readFileSync(path.join(ROOT, file), 'utf8').matchAll(/npm run [a-z][\w:-]*[^`\n|#]*/g)].map((m) => ({ file, command: m[0].trim() })),
      );
  };

  it('pass their flags after `--` (npm would take a flag before it as its own setting, and drop it)', () => {
    const commands = printed();
    expect(commands.length).toBeGreaterThan(20);
    for (const { file, command } of commands) {
      // What npm reads itself: the words before the separator (` -- ` or `[-- `).
      const ownPart = command.split(/(?:\s|\[)--(?=\s|\]|$)/)[0]!;
      expect({ file, command, flagsBeforeSeparator: /(^|\s|\[)--[a-z]/.test(ownPart) }).toEqual({ file, command, flagsBeforeSeparator: false });
    }
  });

  it('start a server process past its build and configuration check as printed (start:projector needs PUBLIC_URL)', () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'printed-start-'));
    // Every `npm start` and `npm run start:…` code span with the variables printed before it; against a database that is not
    // there, a command that passes its configuration check stops at the database (exit 1: it could not start).
    // Its own DATA_DIR and key, so that nothing is written into the checkout. The `prestart` build runs as printed:
    // `tsc -b` finds dist/ up to date (the global set-up built it) and writes nothing.
    const files = ['README.md', ...readdirSync(path.join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' }).map((f) => path.join('docs', f))];
    // Not the verbatim copies of the briefs (docs/design.md, the spec): their words are the brief's, as given.
    const commands = new Set(
      files
        .filter((file) => file.endsWith('.md') && !VERBATIM_COPIES.includes(file))
        .flatMap((file) => [...readFileSync(path.join(ROOT, file), 'utf8').matchAll(/`((?:[A-Z_]+=\S+ )*npm (?:start|run start:[a-z]+))`/g)].map((m) => m[1]!)),
    );
    expect([...commands].some((c) => c.endsWith('start:projector'))).toBe(true);
    expect([...commands].some((c) => c.endsWith('npm start'))).toBe(true);
    for (const command of commands) {
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        DATABASE_URL: 'postgres://gateway@127.0.0.1:1/none',
        PORT: '0',
        DATA_DIR: dataDir,
        SECRETS_KEY: randomBytes(32).toString('base64'),
      };
      delete env.PUBLIC_URL;
      delete env.ADMIN_TOKEN;
      const run = spawnSync('sh', ['-c', command], { cwd: ROOT, encoding: 'utf8', env, timeout: 60_000 });
      expect({ command, configuration: /Invalid configuration/.test(run.stderr) ? run.stderr : 'accepted' }).toEqual({ command, configuration: 'accepted' });
      expect({ command, stoppedAtTheDatabase: /ECONNREFUSED 127\.0\.0\.1:1/.test(run.stdout + run.stderr), status: run.status }).toEqual({
        command,
        stoppedAtTheDatabase: true,
        status: 1,
      });
    }
    expect(readdirSync(dataDir)).toEqual([]);
    rmSync(dataDir, { recursive: true, force: true });
  });
});
