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
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
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

function npmRun(app: string, command: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const PATH = npmOnPath(path.join(app, '.npm-on-path'));
    const child = spawn('npm', ['run', command], {
      cwd: app,
      env: { ...process.env, ...env, PATH, NODE_OPTIONS: '--preserve-symlinks --preserve-symlinks-main' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
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
