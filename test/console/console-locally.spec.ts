/**
 * docs/console.md, "Running it locally", as printed: the token made by its `node -e`
 * line, then the split topology (two `npm run start:api`, one `npm run start:projector`,
 * each with the printed PUBLIC_URL and the one ADMIN_TOKEN), and a session logged in on
 * one API process accepted by the other. Only the ports differ: free ones, where 3000 and
 * 3001 may be taken by another test file running beside this one.
 */
import { ChildProcess, execSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileDataDir, ROOT } from '../support/gateway-process';
import { STARTED_PROCESSES } from '../support/started-processes';
import { login, request } from './console-fixture';

const SECTION = /^## Running it locally\n([\s\S]*?)^## /m.exec(readFileSync(path.join(ROOT, 'docs/console.md'), 'utf8'))![1]!;

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

/** A printed command line run by sh, the leader of its process group, until it prints `ready`. */
async function startPrinted(line: string, env: Record<string, string>, ready: RegExp): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn('sh', ['-c', line], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? ROOT, DATA_DIR: fileDataDir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  (globalThis as Record<string, unknown> & { [STARTED_PROCESSES]?: Set<ChildProcess> })[STARTED_PROCESSES]?.add(child);
  let text = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${line} did not print ${ready} within 60 s:\n${text}`)), 60_000);
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (ready.test(text)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', () => {
      clearTimeout(timer);
      reject(new Error(`${line} exited:\n${text}`));
    });
  });
  return { child, output: () => text };
}

describe("the console's local split topology, as docs/console.md prints it", () => {
  const started: ChildProcess[] = [];
  afterAll(async () => {
    // The APIs first, the projector last: the last process on the embedded server stops it.
    for (const child of started) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
    }
  });

  it('the printed token opens a session on one API process that the other accepts', async () => {
    const generator = /^ADMIN_TOKEN=\$\((node -e "[^"]+")\) npm start$/m.exec(SECTION)![1]!;
    const token = execSync(generator, { encoding: 'utf8' }).trim();
    expect(token).toMatch(/^[A-Za-z0-9_-]{32,}$/);

    const inline = [...SECTION.replace(/^```[\s\S]*?^```/gm, '').matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    const api = inline.find((c) => c.endsWith('npm run start:api'))!;
    const projector = inline.find((c) => c.endsWith('npm run start:projector'))!;
    expect([api, projector]).toEqual(['PUBLIC_URL=http://127.0.0.1:3000 npm run start:api', 'PUBLIC_URL=http://127.0.0.1:3000 npm run start:projector']);
    expect(inline).toContain('PORT=3001');

    const apis: string[] = [];
    for (let i = 0; i < 2; i += 1) {
      const run = await startPrinted(api, { ADMIN_TOKEN: token, PORT: String(await freePort()) }, /listening on (http:\/\/127\.0\.0\.1:\d+)/);
      started.push(run.child);
      apis.push(/listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(run.output())![1]!);
    }
    // METRICS_PORT=0: the projector's health and metrics port, a free one.
    started.push((await startPrinted(projector, { ADMIN_TOKEN: token, METRICS_PORT: '0' }, /running \d+ projections/)).child);

    const cookie = await login(apis[0]!, token);
    const elsewhere = await request(apis[1]!, 'GET', '/admin', { cookie });
    expect(elsewhere.status).toBe(200);
    expect((await request(apis[1]!, 'GET', '/admin')).status).toBe(303);
  }, 180_000);
});
