import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { makeTraversable } from '#platform/database';
import { FILE_DATA_DIR, STARTED_PROCESSES } from './started-processes';

export const ROOT = path.resolve(__dirname, '../..');

export type Entry =
  | 'gateway'
  | 'api'
  | 'projector'
  | 'rebuild'
  | 'ledger-verify'
  | 'log-verify'
  | 'seed-load'
  | 'read-models-checksum'
  | 'secrets-rotate-key'
  | 'audit-reconcile'
  | 'audit-rotate-signing-key'
  | 'deploy-check';
const ENTRIES: Record<Entry, string> = {
  gateway: 'dist/apps/gateway/src/main.js',
  api: 'dist/apps/api/src/main.js',
  projector: 'dist/apps/projector/src/main.js',
  rebuild: 'dist/apps/projector/src/rebuild.js',
  'ledger-verify': 'dist/apps/projector/src/ledger-verify.js',
  'log-verify': 'dist/apps/projector/src/log-verify.js',
  'seed-load': 'dist/apps/tools/src/seed-load.js',
  'read-models-checksum': 'dist/apps/tools/src/read-models-checksum.js',
  'secrets-rotate-key': 'dist/apps/tools/src/secrets-rotate-key.js',
  'audit-reconcile': 'dist/apps/tools/src/audit-reconcile.js',
  'audit-rotate-signing-key': 'dist/apps/tools/src/audit-rotate-signing-key.js',
  'deploy-check': 'dist/scripts/deploy-check.js',
};

/** Every entry point the tests start. */
export const ENTRY_POINTS = Object.keys(ENTRIES) as Entry[];

const SCRIPTS: Record<string, string> = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts;

/**
 * The npm script that runs `entry` (its command ends in `exec node [flags] <entry>`) and the node flags it gives: the
 * tests start an entry as its script does once past its build step (the jest set-up built dist/).
 */
export function scriptOf(entry: Entry): { name: string; nodeFlags: string[] } {
  const found = Object.entries(SCRIPTS).flatMap(([name, command]) => {
    const match = /(?:^|&& )exec node((?: --\S+)*) (\S+)$/.exec(command);
    return match && match[2] === ENTRIES[entry] ? [{ name, nodeFlags: match[1]!.trim().split(' ').filter(Boolean) }] : [];
  });
  if (found.length !== 1) throw new Error(`${found.length} npm scripts run ${ENTRIES[entry]}`);
  return found[0]!;
}

/** The PUBLIC_URL a test gives start:projector, which refuses to start without one (it serves no page to take an address from). */
export const PROJECTOR_PUBLIC_URL = 'https://pay.example.com';

export interface RunningProcess {
  readonly child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code (or signal name). */
  readonly exited: Promise<number | string>;
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  kill(signal?: NodeJS.Signals): Promise<number | string>;
}

/**
 * The DATA_DIR of a process the test file starts without one: a folder of the file's own,
 * shared by its processes as one deployment's are (the secrets key made by the first
 * start, as on a fresh install), never the checkout's ./data. Removed when the file ends.
 */
export function fileDataDir(): string {
  const realm = globalThis as Record<string, unknown>;
  return ((realm[FILE_DATA_DIR] as string | undefined) ??= temporaryDataDir().dir);
}

/**
 * Starts one of the compiled entry points with the given environment (plus PATH and, unless
 * given, the file's DATA_DIR) and nothing else: the log level is a user's (info) unless the
 * test sets it and says why.
 */
export function startProcess(entry: Entry, env: Record<string, string>, args: string[] = [], options: { ownProcessGroup?: boolean } = {}): RunningProcess {
  const child = spawn(process.execPath, [...scriptOf(entry).nodeFlags, path.join(ROOT, ENTRIES[entry]), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', DATA_DIR: env.DATA_DIR ?? fileDataDir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // As a terminal runs it: the leader of its process group, which Ctrl-C signals whole.
    detached: options.ownProcessGroup === true,
  });
  // Listed for the test environment, which kills what the file leaves running (test-environment.ts).
  (globalThis as Record<string, unknown> & { [STARTED_PROCESSES]?: Set<ChildProcess> })[STARTED_PROCESSES]?.add(child);
  let text = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    text += chunk.toString('utf8');
    for (const l of listeners) l();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => {
      resolve(code ?? signal ?? 'unknown');
      for (const l of listeners) l();
    });
  });
  let exitedAlready = false;
  void exited.then(() => (exitedAlready = true));

  return {
    child,
    output: () => text,
    exited,
    waitForOutput(pattern, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(text);
          if (match) {
            cleanup();
            resolve(match);
          } else if (exitedAlready) {
            cleanup();
            reject(new Error(`${entry} exited before printing ${pattern}; output:\n${text}`));
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`${entry} did not print ${pattern} within ${timeoutMs} ms; output:\n${text}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
    async kill(signal = 'SIGTERM') {
      if (!exitedAlready) child.kill(signal);
      return exited;
    },
  };
}

export interface RunningGateway extends RunningProcess {
  readonly baseUrl: string;
  readonly adminToken: string;
}

/** Starts an entry point that serves HTTP and waits until it printed its address. */
export async function startGateway(entry: 'gateway' | 'api', env: Record<string, string>): Promise<RunningGateway> {
  // The configuration `npm start` gives a user, but for a free port: a test that needs
  // another setting passes it in `env` and says why.
  const proc = startProcess(entry, { PORT: '0', ...env });
  const [, url] = await proc.waitForOutput(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
  // A token given in the environment is never printed; a generated one is, once. A test gives one where it calls the
  // operator API or starts a second process with it; the generated, printed one: gateway-process.spec.ts and the README's.
  const adminToken = env.ADMIN_TOKEN ?? (await proc.waitForOutput(/operator token \(ADMIN_TOKEN, generated for this run\): (\S+)/))[1]!;
  return { ...proc, baseUrl: url!, adminToken };
}

/** A data folder the embedded PostgreSQL (running as the postgres user) can reach. */
export function temporaryDataDir(): { dir: string; remove(): void } {
  const parent = path.join(ROOT, '.tmp');
  makeTraversable(parent);
  const dir = mkdtempSync(path.join(parent, 'data-'));
  makeTraversable(dir);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
