import { ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, WriteStream } from 'node:fs';
import { freeListenPort } from '#platform/net';
import path from 'node:path';
import { sleep } from './spec-client';

/** The repository root (this file runs from dist/scripts/deploy-check/). */
export const ROOT = path.resolve(__dirname, '../../..');

export const ENTRY_POINTS = {
  api: 'dist/apps/api/src/main.js',
  projector: 'dist/apps/projector/src/main.js',
  'ledger-verify': 'dist/apps/projector/src/ledger-verify.js',
} as const;
export type EntryPoint = keyof typeof ENTRY_POINTS;

/** The processes this run started that still run, with the signal that stops them. */
const LIVE = new Map<ChildProcess, NodeJS.Signals>();
// However the check ends (an exception, a closed output pipe, a signal turned into an exit): none is left running.
process.on('exit', () => {
  for (const [child, signal] of LIVE) child.kill(signal);
});

/** Stops `child` with `signal` if the check's process exits before it. */
export function stopWithTheCheck(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): void {
  LIVE.set(child, signal);
  child.once('exit', () => LIVE.delete(child));
}

/**
 * One gateway process of the deployment (an API replica or the projector): started
 * with its environment, its output appended to `logFile`, stopped by a signal.
 */
export class GatewayProcess {
  private child: ChildProcess | null = null;
  private output = '';
  private exited: Promise<number | string> = Promise.resolve('not started');
  private readonly log: WriteStream;

  constructor(
    readonly name: string,
    private readonly entry: EntryPoint,
    private readonly env: Record<string, string>,
    logFile: string,
  ) {
    this.log = createWriteStream(logFile, { flags: 'a' });
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process and waits until its output matches `ready` (its start-up line). */
  async start(ready: RegExp, timeoutMs = 60_000): Promise<void> {
    this.output = '';
    const child = spawn(process.execPath, [path.join(ROOT, ENTRY_POINTS[this.entry])], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    stopWithTheCheck(child);
    this.log.write(`--- ${new Date().toISOString()} ${this.name} started (pid ${child.pid})\n`);
    const onData = (chunk: Buffer) => {
      this.output += chunk.toString('utf8');
      this.log.write(chunk);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.log.write(`--- ${new Date().toISOString()} ${this.name} exited (${code ?? signal})\n`);
        resolve(code ?? signal ?? 'unknown');
      }),
    );
    const deadline = Date.now() + timeoutMs;
    while (!ready.test(this.output)) {
      if (!this.running) throw new Error(`${this.name} exited before it was ready:\n${this.output}`);
      if (Date.now() > deadline) throw new Error(`${this.name} was not ready within ${timeoutMs} ms:\n${this.output}`);
      await sleep(25);
    }
  }

  /** Sends the signal and waits for the exit: the exit code, or the signal's name. */
  async stop(signal: NodeJS.Signals): Promise<number | string> {
    if (this.running) this.child!.kill(signal);
    return this.exited;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.log.end(() => resolve()));
  }
}

/** Runs an entry point to its end: its exit code and output. */
export function runToEnd(entry: EntryPoint, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, ENTRY_POINTS[entry])], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    stopWithTheCheck(child);
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

/** A port nobody listens on now (the replicas need fixed ports: nginx's upstream names them). */
export const freePort = freeListenPort;
