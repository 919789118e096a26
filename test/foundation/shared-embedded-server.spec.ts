/**
 * Processes of one DATA_DIR share its embedded PostgreSQL (docs/configuration.md): the
 * last to stop stops it, whichever started it and however it ends (a signal to a
 * command, a forced exit, a signal while it starts), and a server started again after
 * its postmaster died is found again by the processes still running. Real processes,
 * real signals.
 */
import { existsSync, readFileSync } from 'node:fs';
import { connect, Socket } from 'node:net';
import path from 'node:path';
import { Client } from 'pg';
import { EMBEDDED_DATABASE_NAME, PASSWORD_FILE, PRESENCE } from '#platform/database';
import { spawn } from 'node:child_process';
import { ROOT, RunningProcess, startGateway, startProcess, temporaryDataDir, PROJECTOR_PUBLIC_URL } from '../support/gateway-process';

jest.setTimeout(180_000);

const TOKEN = 'operator-token-for-a-shared-server-0042';

const pidFileOf = (dataDir: string) => path.join(dataDir, 'postgres', 'postmaster.pid');
/** The postmaster's pid and port from postmaster.pid, or null when there is none. */
function postmasterOf(dataDir: string): { pid: number; port: number } | null {
  let lines: string[];
  try {
    lines = readFileSync(pidFileOf(dataDir), 'utf8').split('\n');
  } catch {
    return null; // none (initdb's bootstrap server makes and removes one too)
  }
  return { pid: Number(lines[0]), port: Number(lines[3]) };
}
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return false;
  }
};
const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);

async function untilTrue(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not in time: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
/** A data folder whose removal first kills a postmaster a failed test left on it. */
function dataDir(): { dir: string; remove(): void } {
  const data = temporaryDataDir();
  return {
    dir: data.dir,
    remove() {
      const left = postmasterOf(data.dir);
      if (left && alive(left.pid)) process.kill(left.pid, 'SIGKILL');
      data.remove();
    },
  };
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The application names of the sessions on DATA_DIR's server now ([] when it does not answer). */
async function sessionsOn(dataDir: string): Promise<string[]> {
  const server = postmasterOf(dataDir);
  if (!server) return [];
  const password = readFileSync(path.join(dataDir, PASSWORD_FILE), 'utf8').trim();
  const client = new Client({ host: '127.0.0.1', port: server.port, user: 'postgres', password, database: 'postgres' });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ name: string }>(`SELECT application_name AS name FROM pg_stat_activity WHERE pid <> pg_backend_pid()`);
    return rows.map((r) => r.name);
  } catch {
    return [];
  } finally {
    await client.end().catch(() => undefined);
  }
}

const status = (url: string) =>
  fetch(url).then(
    (r) => r.status,
    () => 0,
  );

/** A projector on DATA_DIR, answering health on METRICS_PORT; resolves once it is ready. */
async function startProjector(dataDir: string): Promise<RunningProcess & { ready(): Promise<number> }> {
  const projector = startProcess('projector', { DATA_DIR: dataDir, METRICS_PORT: '0', PUBLIC_URL: PROJECTOR_PUBLIC_URL, ADMIN_TOKEN: TOKEN });
  const [, url] = await projector.waitForOutput(/metrics and health \(METRICS_PORT, no token\): (http:\/\/127\.0\.0\.1:\d+)/);
  const ready = () => status(`${url}/health/ready`);
  await untilTrue(async () => (await ready()) === 200, 'the projector ready');
  return { ...projector, ready };
}

/**
 * A request the API is handling, whose answer does not come within the stop's bound: an
 * operator read of a table held locked here (the drain closes a connection with no whole
 * request in, so a request half sent no longer holds it). `release` lets it go.
 */
async function hangingRequest(baseUrl: string, dataDir: string): Promise<{ socket: Socket; release(): Promise<void> }> {
  const server = postmasterOf(dataDir)!;
  const password = readFileSync(path.join(dataDir, PASSWORD_FILE), 'utf8').trim();
  const holder = new Client({ host: '127.0.0.1', port: server.port, user: 'postgres', password, database: EMBEDDED_DATABASE_NAME });
  holder.on('error', () => undefined);
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query('SET LOCAL idle_in_transaction_session_timeout = 0; SET LOCAL statement_timeout = 0');
  await holder.query('LOCK TABLE webhook_deliveries IN ACCESS EXCLUSIVE MODE');
  const socket = connect({ host: '127.0.0.1', port: Number(new URL(baseUrl).port) });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(`GET /admin/v1/webhook-deliveries HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
  await sleep(500);
  return { socket, release: () => holder.end().catch(() => undefined) };
}

/** A process that joins DATA_DIR's server (argv[1]) and exits at once without stop(): its 'exit' hook leaves it. */
const JOIN_AND_EXIT = `
  const { startEmbeddedPostgres } = require(${JSON.stringify(path.join(ROOT, 'dist/libs/platform/src/database/index.js'))});
  startEmbeddedPostgres(process.argv[1]).then(() => process.exit(0), (e) => { console.error(e); process.exit(3); });`;

describe('one embedded server shared by the processes of a DATA_DIR', () => {
  it('Ctrl-C of a command that started the server ends it with 130 and leaves the server to the API that joined it', async () => {
    const data = dataDir();
    try {
      // A history that takes the verification a while.
      const seed = startProcess('seed-load', { DATA_DIR: data.dir }, ['--events', '5000']);
      expect(await seed.exited).toBe(0);
      expect(postmasterOf(data.dir)).toBeNull();

      // As a terminal runs it (setsid): the command starts the server.
      const verify = startProcess('ledger-verify', { DATA_DIR: data.dir }, [], { ownProcessGroup: true });
      await untilTrue(async () => (await sessionsOn(data.dir)).includes('gateway-ledger-verify'), 'the verification running');
      // Held where it is (it still runs, its sessions open) while an API joins the server.
      process.kill(verify.child.pid!, 'SIGSTOP');
      const server = postmasterOf(data.dir)!;
      expect(parentOf(server.pid)).toBe(verify.child.pid);
      const api = await startGateway('api', { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN });
      try {
        await untilTrue(async () => (await status(`${api.baseUrl}/health/ready`)) === 200, 'the API ready');
        // Ctrl-C in its terminal: SIGINT to its process group.
        process.kill(-verify.child.pid!, 'SIGINT');
        process.kill(verify.child.pid!, 'SIGCONT');
        expect(await verify.exited).toBe(130);
        // The server runs on for the API.
        await sleep(2_000);
        expect(alive(server.pid)).toBe(true);
        expect(await status(`${api.baseUrl}/health/ready`)).toBe(200);
      } finally {
        expect(await api.kill('SIGTERM')).toBe(0);
      }
      // The last one to stop stopped it.
      expect(postmasterOf(data.dir)).toBeNull();
      expect(alive(server.pid)).toBe(false);

      // Alone on the server it started, Ctrl-C ends the command with 130 and stops the server.
      const alone = startProcess('ledger-verify', { DATA_DIR: data.dir }, [], { ownProcessGroup: true });
      await untilTrue(async () => (await sessionsOn(data.dir)).includes('gateway-ledger-verify'), 'the verification running alone');
      process.kill(alone.child.pid!, 'SIGSTOP');
      const its = postmasterOf(data.dir)!;
      process.kill(-alone.child.pid!, 'SIGINT');
      process.kill(alone.child.pid!, 'SIGCONT');
      expect(await alone.exited).toBe(130);
      expect(postmasterOf(data.dir)).toBeNull();
      expect(alive(its.pid)).toBe(false);
    } finally {
      data.remove();
    }
  });

  // docs/operations.md: "130 (143, 129) ended by Ctrl-C (SIGTERM, SIGHUP) before its outcome was decided".
  it('SIGTERM and SIGHUP of a command before its outcome is decided end it with 143 and 129, and stop the server it started', async () => {
    const data = dataDir();
    try {
      const seed = startProcess('seed-load', { DATA_DIR: data.dir }, ['--events', '5000']);
      expect(await seed.exited).toBe(0);
      for (const [signal, code] of [
        ['SIGTERM', 143],
        ['SIGHUP', 129],
      ] as const) {
        // Held before its verdict: a run that printed it already (a fast machine) is let finish and tried again.
        let verify = startProcess('ledger-verify', { DATA_DIR: data.dir }, [], { ownProcessGroup: true });
        for (let attempt = 1; ; attempt++) {
          await untilTrue(async () => (await sessionsOn(data.dir)).includes('gateway-ledger-verify'), `the verification running (${signal})`);
          process.kill(verify.child.pid!, 'SIGSTOP');
          if (!verify.output().includes('OK:') || attempt === 3) break;
          process.kill(verify.child.pid!, 'SIGCONT');
          expect(await verify.exited).toBe(0);
          verify = startProcess('ledger-verify', { DATA_DIR: data.dir }, [], { ownProcessGroup: true });
        }
        const server = postmasterOf(data.dir)!;
        process.kill(-verify.child.pid!, signal);
        process.kill(verify.child.pid!, 'SIGCONT');
        expect({ signal, code: await verify.exited }).toEqual({ signal, code });
        expect(postmasterOf(data.dir)).toBeNull();
        expect(alive(server.pid)).toBe(false);
      }
    } finally {
      data.remove();
    }
  });

  // log:verify printed its OK and audit:rotate-signing-key its new key, then exited 130: a script read "not done".
  it('a Ctrl-C once the outcome is decided (verdict printed, rotation committed) exits with the outcome, and the server is stopped', async () => {
    const data = dataDir();
    try {
      const seed = startProcess('seed-load', { DATA_DIR: data.dir }, ['--events', '500']);
      expect(await seed.exited).toBe(0);
      for (const [entry, printed] of [
        ['log-verify', /^OK: /m],
        ['audit-rotate-signing-key', /signs from now on/],
      ] as const) {
        // As a terminal runs it, alone on the server it starts (and stops while it closes).
        const command = startProcess(entry, { DATA_DIR: data.dir }, [], { ownProcessGroup: true });
        await command.waitForOutput(printed);
        // Held there (it may have ended already: then there is nothing to interrupt), Ctrl-C, and on.
        const held = (signal: NodeJS.Signals, pid: number) => {
          try {
            process.kill(pid, signal);
          } catch {
            // ended
          }
        };
        held('SIGSTOP', command.child.pid!);
        held('SIGINT', -command.child.pid!);
        held('SIGCONT', command.child.pid!);
        expect({ entry, code: await command.exited }).toEqual({ entry, code: 0 });
        await untilTrue(() => postmasterOf(data.dir) === null, 'the server stopped');
      }
    } finally {
      data.remove();
    }
  });

  it('ledger:verify that finds a difference (exit 1) leaves the server to the API on it, and alone stops the server it started', async () => {
    const data = dataDir();
    try {
      const api = await startGateway('api', { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN });
      const server = postmasterOf(data.dir)!;
      try {
        // A difference to find: the read model has a ledger the log does not.
        const password = readFileSync(path.join(data.dir, PASSWORD_FILE), 'utf8').trim();
        const client = new Client({ host: '127.0.0.1', port: server.port, user: 'postgres', password, database: EMBEDDED_DATABASE_NAME });
        await client.connect();
        await client.query(`INSERT INTO ledger_balances (account_id, mode, account, balance) VALUES ('no-such-account', 'live', 'available', 100)`);
        await client.end();
        const beside = startProcess('ledger-verify', { DATA_DIR: data.dir });
        expect({ exit: await beside.exited, found: beside.output().includes('unknown_in_read_model') }).toEqual({ exit: 1, found: true });
        await sleep(1_000);
        expect(alive(server.pid)).toBe(true);
        expect(await status(`${api.baseUrl}/health/ready`)).toBe(200);
      } finally {
        expect(await api.kill('SIGTERM')).toBe(0);
      }
      expect(postmasterOf(data.dir)).toBeNull();

      const alone = startProcess('ledger-verify', { DATA_DIR: data.dir });
      await untilTrue(() => postmasterOf(data.dir) !== null, 'the server started by the command');
      const its = postmasterOf(data.dir)!;
      expect(await alone.exited).toBe(1);
      expect(postmasterOf(data.dir)).toBeNull();
      expect(alive(its.pid)).toBe(false);
    } finally {
      data.remove();
    }
  });

  it('an API that started the server and is forced to exit after its drain (a request that never ends) leaves the server to the projector on it', async () => {
    const data = dataDir();
    try {
      const api = await startGateway('api', { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN });
      const server = postmasterOf(data.dir)!;
      expect(parentOf(server.pid)).toBe(api.child.pid);
      const projector = await startProjector(data.dir);
      try {
        const hanging = await hangingRequest(api.baseUrl, data.dir);
        // Not drained within 15 s: the API exits 1.
        expect(await api.kill('SIGTERM')).toBe(1);
        hanging.socket.destroy();
        await hanging.release();
        await sleep(2_000);
        expect(alive(server.pid)).toBe(true);
        expect(await projector.ready()).toBe(200);
      } finally {
        expect(await projector.kill('SIGTERM')).toBe(0);
      }
      expect(postmasterOf(data.dir)).toBeNull();
      expect(alive(server.pid)).toBe(false);

      // Alone on the server it started, the API forced to exit stops it.
      const alone = await startGateway('api', { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN });
      const its = postmasterOf(data.dir)!;
      const hanging = await hangingRequest(alone.baseUrl, data.dir);
      expect(await alone.kill('SIGTERM')).toBe(1);
      hanging.socket.destroy();
      await hanging.release();
      expect(postmasterOf(data.dir)).toBeNull();
      expect(alive(its.pid)).toBe(false);
    } finally {
      data.remove();
    }
  });

  it('SIGTERM while the process starts the server (nothing else running) stops it with the server: exit 0, no postmaster left', async () => {
    const data = dataDir();
    try {
      for (const round of ['an empty folder', 'a stopped server', 'a stopped server again']) {
        const gateway = startProcess('gateway', { DATA_DIR: data.dir, PORT: '0' });
        await untilTrue(() => (postmasterOf(data.dir)?.pid ?? 0) > 0, 'the postmaster spawned');
        const server = postmasterOf(data.dir)!;
        gateway.child.kill('SIGTERM');
        const exited = await gateway.exited;
        expect({ round, exited, output: gateway.output().includes('listening on') ? 'it became ready first' : 'stopped while starting' }).toEqual({
          round,
          exited: 0,
          output: 'stopped while starting',
        });
        expect({ round, pidFile: existsSync(pidFileOf(data.dir)), postmaster: alive(server.pid) }).toEqual({ round, pidFile: false, postmaster: false });
      }
    } finally {
      data.remove();
    }
  });

  it('two started at once, SIGTERM to the one starting the server while both are on it: it exits 0 and leaves the server to the other, which starts', async () => {
    const data = dataDir();
    try {
      const env = { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN, PORT: '0' };
      const both = [startProcess('api', env), startProcess('api', env)];
      await untilTrue(async () => (await sessionsOn(data.dir)).filter((name) => name === PRESENCE).length === 2, 'both on the server');
      const server = postmasterOf(data.dir)!;
      const starter = both.find((p) => p.child.pid === parentOf(server.pid))!;
      const other = both.find((p) => p !== starter)!;
      expect(starter.output()).not.toContain('listening on');
      starter.child.kill('SIGTERM');
      expect(await starter.exited).toBe(0);
      const [, url] = await other.waitForOutput(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      expect(await status(`${url}/health/ready`)).toBe(200);
      expect(alive(server.pid)).toBe(true);
      expect(await other.kill('SIGTERM')).toBe(0);
      expect(postmasterOf(data.dir)).toBeNull();
      expect(alive(server.pid)).toBe(false);
    } finally {
      data.remove();
    }
  });

  it('after the postmaster is killed, a process started again brings the server back on its port: every running process recovers, and the last to stop stops it', async () => {
    const data = dataDir();
    try {
      const env = { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN };
      const api = await startGateway('api', env);
      const projector = await startProjector(data.dir);
      const ready = () => status(`${api.baseUrl}/health/ready`);
      await untilTrue(async () => (await ready()) === 200, 'the API ready');
      const first = postmasterOf(data.dir)!;
      process.kill(first.pid, 'SIGKILL');
      await untilTrue(async () => (await ready()) === 503 && (await projector.ready()) === 503, 'both unready without their server');
      // Each says so at error level, and what to do; the one that started the server, what it said last.
      const gone =
        /"level":50.*the embedded PostgreSQL under .* is not running \((.*?)\); requests answer 503 until it runs again\. It starts with the next process of this DATA_DIR/;
      expect((await api.waitForOutput(gone))[1]).toMatch(/^its last lines: .*unexpected postmaster exit/);
      expect((await projector.waitForOutput(gone))[1]).toBe('started by another process: its lines went there');

      // Another process of the DATA_DIR starts the server again, on the port the others know.
      const again = await startGateway('api', env);
      const second = postmasterOf(data.dir)!;
      expect(second.pid).not.toBe(first.pid);
      expect(second.port).toBe(first.port);
      await untilTrue(async () => (await ready()) === 200 && (await projector.ready()) === 200, 'both ready again');

      // Stopped in turn, the last one (not the one that started this server) stops it.
      expect(await again.kill('SIGTERM')).toBe(0);
      expect(await projector.kill('SIGTERM')).toBe(0);
      expect(alive(second.pid)).toBe(true);
      expect(await api.kill('SIGTERM')).toBe(0);
      expect(postmasterOf(data.dir)).toBeNull();
      expect(alive(second.pid)).toBe(false);
    } finally {
      data.remove();
    }
  });
  it('while the server is away, each poller says so once at warn level (no stack per retry), and again when it is back; requests answered 503 once too', async () => {
    const data = dataDir();
    try {
      const env = { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN };
      const gateway = await startGateway('gateway', env);
      const ready = () => status(`${gateway.baseUrl}/health/ready`);
      await untilTrue(async () => (await ready()) === 200, 'the gateway ready');
      const from = gateway.output().length;
      const lines = () =>
        gateway
          .output()
          .slice(from)
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { level: number; msg: string; err?: unknown });
      process.kill(postmasterOf(data.dir)!.pid, 'SIGKILL');
      await gateway.waitForOutput(/the embedded PostgreSQL under .* is not running/);
      // A short outage: the workers poll every 500 ms, the dispatcher every 100 ms, the projections back off from 100 ms.
      // Requests meanwhile answer 503: 30 of them, 10 at a time.
      const answered: number[] = [];
      for (let round = 0; round < 3; round++) {
        const get = () => fetch(`${gateway.baseUrl}/admin/v1/webhook-deliveries`, { headers: { authorization: `Bearer ${TOKEN}` } });
        answered.push(...(await Promise.all(Array.from({ length: 10 }, () => get().then((r) => r.status)))));
        await sleep(1_000);
      }
      expect(answered).toEqual(Array(30).fill(503));
      const away = /: the database is not reached; (retrying|answering 503)/;
      const during = lines();
      const again = await startGateway('api', env);
      await untilTrue(async () => (await ready()) === 200, 'the gateway ready again');
      const pollers = (re: RegExp) => lines().flatMap((l) => (re.test(l.msg) ? [l.msg.split(':')[0]!] : []));
      // Requests are not told back (no request tells the database is reached: the pollers do).
      const polling = () => new Set(pollers(away).filter((name) => !name.startsWith('API requests')));
      await untilTrue(() => pollers(/: the database is reached again$/).length >= polling().size, 'every poller back');

      const errors = during.filter((l) => l.level >= 50);
      console.log(`${during.length} lines in the 3 s outage: ${errors.length} at error level, ${pollers(away).length} told the database away`);
      // The one line that says what to do is the only error; the pollers and the requests each said once that the database is away.
      expect(errors.map((l) => l.msg)).toEqual([expect.stringMatching(/the embedded PostgreSQL under .* is not running/)]);
      expect(pollers(away)).toEqual(expect.arrayContaining(['worker hold-release', 'webhook dispatcher', expect.stringMatching(/^API requests \(/)]));
      expect(pollers(away).length).toBe(new Set(pollers(away)).size);
      expect(during.filter((l) => away.test(l.msg) && (l.level !== 40 || l.err !== undefined))).toEqual([]);
      expect(new Set(pollers(/: the database is reached again$/))).toEqual(polling());
      await Promise.all([again.kill('SIGKILL'), gateway.kill('SIGKILL')]);
    } finally {
      data.remove();
    }
  });

  it('a server this process started that stops by itself (no postmaster.pid left): told with its own last lines', async () => {
    const data = dataDir();
    try {
      const api = await startGateway('api', { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN });
      // A fast shutdown, as a postmaster ending itself does: it removes postmaster.pid.
      process.kill(postmasterOf(data.dir)!.pid, 'SIGINT');
      const [, said] = await api.waitForOutput(/the embedded PostgreSQL under .* is not running \((.*?)\); requests answer 503/);
      expect(said).toMatch(/^its last lines: .*shut down/);
      await api.kill('SIGKILL');
    } finally {
      data.remove();
    }
  });

  it("a second outage, of a server another process started: told again, without the first server's last lines", async () => {
    const data = dataDir();
    try {
      const env = { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN };
      const api = await startGateway('api', env);
      const ready = () => status(`${api.baseUrl}/health/ready`);
      const told = () => [...api.output().matchAll(/the embedded PostgreSQL under .* is not running \((.*?)\); requests answer 503/g)].map((m) => m[1]!);
      process.kill(postmasterOf(data.dir)!.pid, 'SIGKILL');
      await untilTrue(async () => told().length === 1, 'the first outage told');
      const again = await startGateway('api', env);
      await untilTrue(async () => (await ready()) === 200, 'the first API ready again');
      process.kill(postmasterOf(data.dir)!.pid, 'SIGKILL');
      await untilTrue(async () => told().length === 2, 'the second outage told');
      expect(told()[0]).toMatch(/^its last lines: /);
      expect(told()[1]).toBe('started by another process: its lines went there');
      await Promise.all([again.kill('SIGKILL'), api.kill('SIGKILL')]);
    } finally {
      data.remove();
    }
  });

  it('a server started again by another process and gone before this one reopened its presence: told too', async () => {
    const data = dataDir();
    let again: Promise<RunningProcess> | null = null;
    try {
      const env = { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN };
      const api = await startGateway('api', env);
      const told = () => [...api.output().matchAll(/the embedded PostgreSQL under .* is not running \((.*?)\); requests answer 503/g)].map((m) => m[1]!);
      const first = postmasterOf(data.dir)!.pid;
      process.kill(first, 'SIGKILL');
      await untilTrue(async () => told().length === 1, 'the first outage told');
      // Another process starts the server again; it is killed as soon as it runs, before this API's presence
      // (reopened every 500 ms) could reach it.
      again = startGateway('api', env);
      again.catch(() => undefined);
      let second = 0;
      await untilTrue(() => {
        const now = postmasterOf(data.dir);
        if (now === null || now.pid === first || !alive(now.pid)) return false;
        second = now.pid;
        return true;
      }, 'the server started again');
      process.kill(second, 'SIGKILL');
      await untilTrue(async () => told().length >= 2, 'the second outage told');
      expect(told()[1]).toBe('started by another process: its lines went there');
      await api.kill('SIGKILL');
    } finally {
      await again?.then((p) => p.kill('SIGKILL')).catch(() => undefined);
      data.remove();
    }
  });

  it('a command that ends just after a backend crashed leaves the server to the API on it (its presence is reopening, not gone)', async () => {
    const data = dataDir();
    try {
      const seed = startProcess('seed-load', { DATA_DIR: data.dir }, ['--events', '5000']);
      expect(await seed.exited).toBe(0);
      const api = await startGateway('api', { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN });
      const server = postmasterOf(data.dir)!;
      try {
        const verify = startProcess('ledger-verify', { DATA_DIR: data.dir }, [], { ownProcessGroup: true });
        await untilTrue(async () => (await sessionsOn(data.dir)).includes('gateway-ledger-verify'), 'the verification running');
        process.kill(verify.child.pid!, 'SIGSTOP');
        // A backend crashes (an OOM kill): the postmaster ends every session, the API's presence too, and recovers.
        const password = readFileSync(path.join(data.dir, PASSWORD_FILE), 'utf8').trim();
        const victim = new Client({ host: '127.0.0.1', port: server.port, user: 'postgres', password, database: 'postgres' });
        victim.on('error', () => undefined);
        await victim.connect();
        // WAL to replay after the crash, so that recovery takes seconds (as after a seed:load), longer than the
        // time a stopper gives the others' presence counted from when the server's processes restart.
        await victim.query('CREATE TABLE wal_to_replay AS SELECT g, md5(g::text) AS filler FROM generate_series(1, 4000000) AS g');
        const backend = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        process.kill(backend, 'SIGKILL');
        // Ctrl-C on the command at once: it ends while the presence of the API is still reopening.
        process.kill(-verify.child.pid!, 'SIGINT');
        process.kill(verify.child.pid!, 'SIGCONT');
        expect(await verify.exited).toBe(130);
        await sleep(1_000);
        expect(alive(server.pid)).toBe(true);
        await untilTrue(async () => (await status(`${api.baseUrl}/health/ready`)) === 200, 'the API ready again');
      } finally {
        expect(await api.kill('SIGTERM')).toBe(0);
      }
      expect(postmasterOf(data.dir)).toBeNull();
      expect(alive(server.pid)).toBe(false);
    } finally {
      data.remove();
    }
  });

  it('commands, and a process that leaves through its exit hook, leave the server to a process present on it: the last command stops it', async () => {
    const data = dataDir();
    try {
      // The server runs with only a presence session on it: its starter was killed.
      const starter = await startGateway('gateway', { DATA_DIR: data.dir, ADMIN_TOKEN: TOKEN });
      await starter.kill('SIGKILL');
      const server = postmasterOf(data.dir)!;
      expect(alive(server.pid)).toBe(true);
      const password = readFileSync(path.join(data.dir, PASSWORD_FILE), 'utf8').trim();
      const present = new Client({
        host: '127.0.0.1',
        port: server.port,
        user: 'postgres',
        password,
        database: EMBEDDED_DATABASE_NAME,
        application_name: PRESENCE,
      });
      present.on('error', () => undefined);
      await present.connect();
      try {
        for (const command of ['read-models-checksum', 'log-verify'] as const) {
          const run = startProcess(command, { DATA_DIR: data.dir });
          expect([command, await run.exited]).toEqual([command, 0]);
          expect([command, alive(server.pid)]).toEqual([command, true]);
        }
        // One that leaves through its 'exit' hook (process.exit without stop()) leaves it running too.
        const exits = spawn(process.execPath, ['-e', JOIN_AND_EXIT, data.dir], { cwd: ROOT, stdio: 'ignore' });
        expect(await new Promise((resolve) => exits.on('exit', resolve))).toBe(0);
        expect(alive(server.pid)).toBe(true);
        expect((await present.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      } finally {
        await present.end().catch(() => undefined);
      }
      // Nobody else on it: the next command to leave it stops it.
      expect(await startProcess('read-models-checksum', { DATA_DIR: data.dir }).exited).toBe(0);
      expect(postmasterOf(data.dir)).toBeNull();
      expect(alive(server.pid)).toBe(false);
    } finally {
      data.remove();
    }
  });

  it('two processes that exit at the same moment (each slow to die) do not leave the server to each other: it is stopped', async () => {
    const data = dataDir();
    // Each starts or joins the server, then exits at the same instant; an exit listener keeps it alive 300 ms more.
    const script = `
      const { startEmbeddedPostgres } = require(${JSON.stringify(path.join(ROOT, 'dist/libs/platform/src/database/index.js'))});
      (async () => {
        await startEmbeddedPostgres(process.argv[1]);
        process.on('exit', () => { const until = Date.now() + 300; while (Date.now() < until); });
        process.stdout.write('ready\\n');
        await new Promise((r) => setTimeout(r, Math.max(0, Number(process.argv[2]) - Date.now())));
        process.exit(0);
      })().catch((e) => { console.error(e); process.exit(3); });`;
    try {
      for (let round = 0; round < 3; round++) {
        const at = Date.now() + 6_000;
        const exits = [0, 1].map(
          () =>
            new Promise<number | null>((resolve) => {
              const child = spawn(process.execPath, ['-e', script, data.dir, String(at)], { cwd: ROOT, stdio: 'ignore' });
              child.on('exit', (code) => resolve(code));
            }),
        );
        expect(await Promise.all(exits)).toEqual([0, 0]);
        await sleep(500);
        const left = postmasterOf(data.dir);
        expect([round, left !== null && alive(left.pid)]).toEqual([round, false]);
      }
    } finally {
      data.remove();
    }
  });
});
