/**
 * The operator's commands as the production image runs them. The Dockerfile builds
 * dist/ and then prunes the dev dependencies (`npm prune --omit=dev`), TypeScript with
 * them, so `npm run ledger:verify` there has no tsc to build with: it must run the
 * dist/ the image was built with (`docker compose run --rm projector npm run …`,
 * docs/operations.md). No Docker engine runs here: the test lays out the image's /app
 * (package.json, the build step's script, dist/, and node_modules holding only the
 * packages package-lock.json does not mark dev) and runs the commands in it with
 * symlinks kept as paths, so a package the image lacks is not found through the checkout.
 */
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PROJECTOR_PUBLIC_URL } from '../support/gateway-process';
import { STARTED_PROCESSES } from '../support/started-processes';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The image's /app: what the Dockerfile's last stage copies, dist/ only when asked; with `sources`, a
 * checkout installed without its dev dependencies instead (`npm install --omit=dev`: the sources' build
 * configuration is there).
 */
function imageLayout(withDist: boolean, sources = false): string {
  const app = mkdtempSync(path.join(tmpdir(), 'production-image-'));
  copyFileSync(path.join(ROOT, 'package.json'), path.join(app, 'package.json'));
  mkdirSync(path.join(app, 'scripts'));
  copyFileSync(path.join(ROOT, 'scripts', 'build-dist.js'), path.join(app, 'scripts', 'build-dist.js'));
  if (withDist) symlinkSync(path.join(ROOT, 'dist'), path.join(app, 'dist'));
  if (sources) copyFileSync(path.join(ROOT, 'tsconfig.build.json'), path.join(app, 'tsconfig.build.json'));
  const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  for (const [key, entry] of Object.entries(lock.packages)) {
    if (entry.dev || !/^node_modules\/(@[^/]+\/)?[^/]+$/.test(key)) continue;
    const installed = path.join(ROOT, key);
    if (!existsSync(installed)) continue; // another platform's optional package
    mkdirSync(path.dirname(path.join(app, key)), { recursive: true });
    symlinkSync(installed, path.join(app, key));
  }
  return app;
}

/**
 * npm by its own script: under --preserve-symlinks-main, npm started through its usual link finds
 * none of its files. A folder first on PATH holds an `npm` that runs it so, for the scripts' own npm too.
 */
function npmOnPath(folder: string): string {
  const cli = realpathSync(spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim());
  mkdirSync(folder, { recursive: true });
  writeFileSync(path.join(folder, 'npm'), `#!/bin/sh\nexec '${process.execPath}' '${cli}' "$@"\n`, { mode: 0o755 });
  // Not the checkout's node_modules/.bin that npm test puts on PATH: the image has no tsc anywhere.
  const rest = (process.env.PATH ?? '').split(path.delimiter).filter((dir) => !dir.endsWith(path.join('node_modules', '.bin')));
  return [folder, ...rest].join(path.delimiter);
}

/** `npm run <command> [-- args]` in the layout, with PATH, HOME and `env` only (not the test runner's environment). */
function npmRun(app: string, command: string, env: Record<string, string>, args: string[] = []): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = npmStart(app, command, env, args);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** npm the leader of its process group, as a terminal starts it: what a failed test leaves is killed with the group (test-environment.ts). */
function npmStart(app: string, command: string, env: Record<string, string>, args: string[] = []) {
  const PATH = npmOnPath(path.join(app, '.npm-on-path'));
  const child = spawn('npm', ['run', '--silent', command, ...(args.length > 0 ? ['--', ...args] : [])], {
    cwd: app,
    env: { PATH, HOME: process.env.HOME ?? app, ...env, NODE_OPTIONS: '--preserve-symlinks --preserve-symlinks-main' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  (globalThis as Record<string, unknown> & { [STARTED_PROCESSES]?: Set<ChildProcess> })[STARTED_PROCESSES]?.add(child);
  return child;
}

/** A start command until it serves (its line `serving`), then SIGTERM through npm: its exit code and output. */
async function serveThenStop(app: string, command: string, env: Record<string, string>, serving: RegExp): Promise<{ code: number | null; output: string }> {
  const child = npmStart(app, command, env);
  let output = '';
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command} did not print ${serving} within 60 s:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (serving.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void closed.then(() => {
      clearTimeout(timer);
      reject(new Error(`${command} exited before serving:\n${output}`));
    });
  });
  child.kill('SIGTERM');
  return { code: await closed, output };
}

describe('operator commands in the production image (no TypeScript)', () => {
  let db: TestDatabase;
  const folders: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
  });

  afterAll(async () => {
    await db?.drop();
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it('the layout is the Dockerfile’s: dev dependencies pruned; the last stage copies these and no tsconfig.build.json', () => {
    const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
    const stages = dockerfile.split(/^FROM /m);
    expect(stages[1]).toMatch(/^RUN npm run build && npm prune --omit=dev$/m);
    const copied = [...stages[stages.length - 1]!.matchAll(/^COPY --from=build \/app\/(\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]);
    expect(copied).toEqual([
      ['package.json', './'],
      ['node_modules', 'node_modules'],
      ['dist', 'dist'],
      ['scripts/build-dist.js', 'scripts/build-dist.js'],
    ]);
    const instructions = stages[stages.length - 1]!.split('\n').filter((line) => !line.startsWith('#'));
    expect(instructions.filter((line) => /tsconfig|^COPY (?!--from=build \/app\/\S)/.test(line))).toEqual([]);
  });

  it('run the dist/ the image was built with', async () => {
    const app = imageLayout(true);
    folders.push(app);
    // The layout is the image's: TypeScript cannot be found from it.
    expect(() => require.resolve('typescript', { paths: [app] })).toThrow();
    const logVerify = await npmRun(app, 'log:verify', { DATABASE_URL: db.url });
    expect({ code: logVerify.code, output: logVerify.output }).toEqual({ code: 0, output: expect.stringContaining('OK: every stream chain recomputes') });
    const ledgerVerify = await npmRun(app, 'ledger:verify', { DATABASE_URL: db.url });
    expect({ code: ledgerVerify.code, output: ledgerVerify.output }).toEqual({ code: 0, output: expect.stringContaining('OK: every entry balances') });
  });

  it('run every other command docs/operations.md lists for the image: the start commands serve and stop, the others finish', async () => {
    const app = imageLayout(true);
    folders.push(app);
    const own = await createTestDatabase({ poolSize: 1 });
    try {
      const env = { DATABASE_URL: own.url, DATA_DIR: path.join(app, 'data') };
      const finished = async (command: string, args: string[] = []) => {
        let run = await npmRun(app, command, env, args);
        // A report waits 5 s for entries still being posted, and says to run it again: a transaction held open that
        // long by another suite on the shared test server (xids are the server's) looks the same to it.
        for (let again = 0; again < 3 && run.code === 2 && run.output.includes('run it again in a moment'); again++)
          run = await npmRun(app, command, env, args);
        expect({ command, code: run.code, output: run.code === 0 ? '' : run.output }).toEqual({ command, code: 0, output: '' });
      };
      await finished('seed:load', ['--events', '300', '--seed', 'image']);
      await finished('projections:rebuild');
      await finished('read-models:checksum');
      await finished('audit:reconcile', ['--from', '2024-01-01T00:00:00Z', '--to', '2024-02-01T00:00:00Z']);
      // The key commands rotate the deployment's keys: here they load and answer --help, what a missing package would stop.
      await finished('secrets:rotate-key', ['--help']);
      await finished('audit:rotate-signing-key', ['--help']);
      // PORT=0 and METRICS_PORT=0: free ports. The split processes share an operator token; the projector needs PUBLIC_URL.
      const split = { ...env, ADMIN_TOKEN: 'production-image-operator-token-0001', PORT: '0', METRICS_PORT: '0' };
      for (const [command, serving, extra] of [
        ['start', /listening on http/, {}],
        ['start:api', /listening on http/, {}],
        ['start:projector', /running \d+ projections/, { PUBLIC_URL: PROJECTOR_PUBLIC_URL }],
      ] as const) {
        const run = await serveThenStop(app, command, { ...split, ...extra }, serving);
        expect({ command, code: run.code }).toEqual({ command, code: 0 });
      }
    } finally {
      await own.drop();
    }
  }, 180_000);

  it('without dist/ and without TypeScript, say what to run (exit 2)', async () => {
    const app = imageLayout(false);
    folders.push(app);
    const run = await npmRun(app, 'log:verify', { DATABASE_URL: db.url });
    expect(run.code).toBe(2);
    expect(run.output).toContain('TypeScript is not installed, so dist/ cannot be built from the sources: run `npm install --include=dev` first');
  });

  it('a checkout without TypeScript does not run its dist/, which may be older than its sources (exit 2; review 67)', async () => {
    const app = imageLayout(true, true);
    folders.push(app);
    const run = await npmRun(app, 'log:verify', { DATABASE_URL: db.url });
    expect(run.code).toBe(2);
    expect(run.output).toContain('TypeScript is not installed, so dist/ cannot be built from the sources');
    expect(run.output).not.toContain('OK: every stream chain');
  });
});
