/**
 * The progress bars of `log:verify` and `projections:rebuild` show progress through the
 * log in log events (issue 35: never a sum over the projections), run as on a terminal
 * (util-linux `script` gives them one, so every update is drawn): the percentages rise
 * through the read and end at 100%, and the count is of the log's events.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ROOT, startProcess } from '../support/gateway-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const EVENTS = 3000;

/** The command run on a pseudo-terminal: its exit code and what it drew. */
function onTerminal(script: string, env: Record<string, string>, args: string[]): Promise<{ code: number | null; output: string }> {
  const command = [process.execPath, path.join(ROOT, script), ...args].map((a) => `'${a}'`).join(' ');
  const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, output })));
}

/** Each drawing of the bar labelled `label`: its percentage and detail. */
function drawings(output: string, label: string): { percent: number; detail: string }[] {
  return output
    .split(/[\r\n]+/)
    .filter((line) => line.startsWith(label))
    .map((line) => /([\d.]+)% (.*)$/.exec(line)!)
    .map((m) => ({ percent: Number(m[1]), detail: m[2]!.trim() }));
}

describe('progress through the log, in log events', () => {
  let db: TestDatabase;
  let logEvents: number;

  beforeAll(async () => {
    db = await createTestDatabase();
    const seed = startProcess('seed-load', { DATABASE_URL: db.url }, ['--events', String(EVENTS), '--seed', 'progress']);
    expect(await seed.exited).toBe(0);
    logEvents = Number((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
  }, 120_000);
  afterAll(async () => {
    await db?.drop();
  });

  it('log:verify: rises page by page through the read of the log and ends at 100%, counting log events', async () => {
    const run = await onTerminal('dist/apps/projector/src/log-verify.js', { DATABASE_URL: db.url }, []);
    expect({ code: run.code, ok: run.output.includes('OK: every stream chain recomputes') }).toEqual({ code: 0, ok: true });
    const drawn = drawings(run.output, 'log:verify');
    const percents = drawn.map((d) => d.percent);
    // A page of the log is 1000 events: a drawing for each, then the end.
    expect(percents.length).toBeGreaterThanOrEqual(Math.floor(logEvents / 1000) + 1);
    expect(percents).toEqual([...percents].sort((a, b) => a - b));
    expect(new Set(percents.filter((p) => p < 100)).size).toBeGreaterThanOrEqual(Math.floor(logEvents / 1000));
    expect(drawn[drawn.length - 1]).toEqual({ percent: 100, detail: `${logEvents} of ${logEvents} log events read` });
    for (const d of drawn.slice(0, -1)) expect(d.detail).toMatch(new RegExp(`^the log: \\d+ of about ${logEvents} log events read$`));
  });

  it('projections:rebuild: rises while the ledger is rebuilt beside the stream catalog computed in SQL, in log events', async () => {
    const run = await onTerminal('dist/apps/projector/src/rebuild.js', { DATABASE_URL: db.url }, ['ledger', 'stream_catalog', '--batch-size', '200']);
    expect(run.code).toBe(0);
    const drawn = drawings(run.output, 'projections');
    const percents = drawn.map((d) => d.percent);
    expect(percents).toEqual([...percents].sort((a, b) => a - b));
    // Through the log, not stuck at 0% until the end.
    expect(percents.filter((p) => p > 0 && p < 100).length).toBeGreaterThan(1);
    expect(drawn[drawn.length - 1]).toEqual({ percent: 100, detail: `the log read to its head (about ${logEvents} log events)` });
    for (const d of drawn.slice(0, -1)) expect(d.detail).toMatch(new RegExp(`^about \\d+ of ${logEvents} log events read$`));
    expect(run.output).not.toContain('applied by the projections');
  }, 120_000);
});
