import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import { request } from 'undici';
import { EmbeddedDatabase, makeTraversable, startEmbeddedPostgres } from '#platform/database';
import { Load, OPERATION_KINDS } from './load';
import { findNginx, renderNginxConf, RunningNginx, startNginx } from './nginx';
import { freePort, GatewayProcess, ROOT, runToEnd } from './processes';
import { formatReport, Phase, Verdict, verdictHolds } from './report';
import { SpecClient, sleep, Traffic } from './spec-client';
import { verify, waitUntilSettled } from './verify';

export interface CheckOptions {
  readonly merchants: number;
  /** Cycles per second of each merchant (a cycle: 7 requests). */
  readonly cyclesPerSecond: number;
  /** Seconds of load before the first fault, and after each step. */
  readonly warmUpSeconds: number;
  /** Keep the temporary folder (logs, nginx files, the embedded database) after a passing or an interrupted run (a failed one keeps it). */
  readonly keep: boolean;
}

export const DEFAULT_OPTIONS: CheckOptions = { merchants: 4, cyclesPerSecond: 2, warmUpSeconds: 4, keep: false };

const API_READY = /listening on http:\/\/127\.0\.0\.1:\d+/;
const PROJECTOR_READY = /running \d+ projections/;

/**
 * `npm run deploy:check`: the documented deployment (deploy/nginx.conf in front of two
 * API processes and a projector on one PostgreSQL) run on this machine, under a bounded
 * load of merchants that follow the spec's retry rules, through a SIGKILL of an API, a
 * restart of the projector and a rolling restart of the APIs. Prints the figures;
 * resolves with the exit code: 0 every promise held, 1 one did not, 2 it could not run.
 */
export async function runDeployCheck(options: CheckOptions): Promise<number> {
  const nginxBinary = findNginx();
  if (!nginxBinary) {
    process.stderr.write('deploy:check: nginx is not installed (Debian: apt-get install -y nginx; or set NGINX_BIN)\n');
    return 2;
  }
  const started = performance.now();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'deploy-check-'));
  makeTraversable(dir);
  // Interrupted (a signal or a closed output, turned into exit 2: the `finally` below never runs), after the
  // exit hooks registered before this one stopped the embedded server and signalled the processes: the folder
  // goes too, unless --keep, or the run had failed, or it ended otherwise (a crash: its logs are needed);
  // either way a line says what became of it.
  let failed = false;
  const leftAtExit = (code: number) => {
    if (options.keep || failed || code !== 2) {
      process.stderr.write(`deploy:check: ${code === 2 ? 'interrupted' : `exit ${code}`}; logs, nginx files and the database are kept in ${dir}\n`);
      return;
    }
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      process.stderr.write(`deploy:check: interrupted; ${dir} removed (--keep keeps it)\n`);
    } catch (error) {
      process.stderr.write(`deploy:check: interrupted; ${dir} could not be removed: ${(error as Error).message}\n`);
    }
  };
  process.on('exit', leftAtExit);
  const phases: Phase[] = [];
  const traffic = new Traffic();
  let phaseStart = performance.now();
  const enter = (name: string) => {
    phases.push({ name: traffic.phase, seconds: (performance.now() - phaseStart) / 1000 });
    traffic.phase = name;
    phaseStart = performance.now();
  };
  const progress = (line: string) => process.stderr.write(`deploy:check: ${((performance.now() - started) / 1000).toFixed(1)} s: ${line}\n`);

  let database: EmbeddedDatabase | null = null;
  let nginx: RunningNginx | null = null;
  let pool: Pool | null = null;
  let client: SpecClient | null = null;
  const processes: GatewayProcess[] = [];
  let passed = false;
  try {
    const databaseUrl = process.env.DATABASE_URL || (database = await startEmbeddedPostgres(path.join(dir, 'data'), { databaseName: 'gateway' })).url;
    progress(database ? 'embedded PostgreSQL started' : 'PostgreSQL of DATABASE_URL');
    const [apiPorts, nginxPort, metricsPort] = [[await freePort(), await freePort()], await freePort(), await freePort()];
    const adminToken = randomBytes(24).toString('base64url');
    const publicUrl = `http://127.0.0.1:${nginxPort}`;
    // What the compose file gives every gateway process, for this machine's addresses.
    const env = {
      NODE_ENV: 'production',
      DATABASE_URL: databaseUrl,
      DATA_DIR: path.join(dir, 'data'),
      ADMIN_TOKEN: adminToken,
      SECRETS_KEY: randomBytes(32).toString('base64'),
      TRUSTED_PROXIES: '127.0.0.1',
      PUBLIC_URL: publicUrl,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      // Refunds complete a second after they are asked for (default 10 s), so the run settles sooner.
      REFUND_PROCESSING_SECONDS: '1',
    };
    const projector = new GatewayProcess('projector', 'projector', { ...env, METRICS_PORT: String(metricsPort) }, path.join(dir, 'projector.log'));
    const apis = apiPorts.map((port, i) => new GatewayProcess(`api-${i + 1}`, 'api', { ...env, PORT: String(port) }, path.join(dir, `api-${i + 1}.log`)));
    processes.push(projector, ...apis);
    // Migrations run once, under their lock, whichever process comes first.
    await Promise.all([projector.start(PROJECTOR_READY), ...apis.map((api) => api.start(API_READY))]);
    progress('projector and API processes started');

    const rendered = renderNginxConf(readFileSync(path.join(ROOT, 'deploy/nginx.conf'), 'utf8'), {
      listen: `127.0.0.1:${nginxPort}`,
      upstreams: apiPorts.map((port) => `127.0.0.1:${port}`),
    });
    nginx = startNginx(nginxBinary, path.join(dir, 'nginx'), rendered);
    await untilReady(`${publicUrl}/health/ready`);
    progress(`nginx ${nginx.version} on ${publicUrl}, API processes on ports ${apiPorts.join(' and ')}, logs in ${dir}`);

    pool = new Pool({ connectionString: databaseUrl, max: 2, application_name: 'gateway-deploy-check' });
    pool.on('error', () => undefined); // an idle client's error: the next query reports it
    client = new SpecClient(publicUrl, traffic);
    const load = new Load(client, adminToken);
    await load.setUp(options.merchants);
    progress(`${options.merchants} merchants set up and funded`);

    enter('warm-up');
    load.start(options.cyclesPerSecond);
    await sleep(options.warmUpSeconds * 1000);

    enter('SIGKILL api-1, start it again');
    progress('SIGKILL api-1');
    await apis[0]!.stop('SIGKILL');
    await sleep(1000);
    progress('start api-1 again');
    await restart(apis[0]!, apiPorts[0]!);
    progress('api-1 ready');
    await sleep(options.warmUpSeconds * 500);

    enter('restart the projector (SIGTERM)');
    progress('SIGTERM the projector, start it again');
    const projectorExit = await projector.stop('SIGTERM');
    progress('projector stopped; start it again');
    await projector.start(PROJECTOR_READY);
    progress('projector running');
    await sleep(options.warmUpSeconds * 500);

    enter('rolling restart api-1, api-2 (SIGTERM)');
    const apiExits: (number | string)[] = [];
    for (const [i, api] of apis.entries()) {
      progress(`rolling restart: SIGTERM ${api.name}`);
      apiExits.push(await api.stop('SIGTERM'));
      progress(`${api.name} stopped; start it again`);
      await restart(api, apiPorts[i]!);
      progress(`${api.name} ready`);
    }
    await sleep(1000);

    enter('finish the cycles in progress');
    await load.stop();

    enter('settle (projector at the head)');
    progress('load stopped; waiting for the projector and the refund processor');
    const unsettled = await waitUntilSettled(pool, load, `http://127.0.0.1:${metricsPort}/health/ready`, 60_000);

    enter('verify');
    const findings = await verify(pool, load);
    const ledgerVerify = await runToEnd('ledger-verify', { DATABASE_URL: databaseUrl, SECRETS_KEY: env.SECRETS_KEY, DATA_DIR: env.DATA_DIR });
    enter('done');

    const rolling = traffic.failuresIn('rolling restart api-1, api-2 (SIGTERM)');
    const verdict: Verdict = {
      failed: sum(OPERATION_KINDS.map((k) => load.tallies.get(k)!.failures.length)),
      lost: sum([...findings.lost.values()]),
      doubled: sum([...findings.doubled.values()]),
      balancesOff: findings.balancesOff,
      rollingServerErrors: rolling.serverErrors,
      rollingNoAnswer: rolling.noAnswer,
      ledgerVerifyExit: ledgerVerify.code,
      unsettled,
      gracefulExits: { projector: projectorExit, apis: apiExits },
    };
    process.stdout.write(
      formatReport({
        options,
        nginxVersion: nginx.version,
        database: database ? 'embedded PostgreSQL' : 'DATABASE_URL',
        phases,
        traffic,
        load,
        findings,
        verdict,
        ledgerVerifyOutput: ledgerVerify.output,
        seconds: (performance.now() - started) / 1000,
      }),
    );
    passed = verdictHolds(verdict);
    return passed ? 0 : 1;
  } catch (error) {
    process.stderr.write(`deploy:check could not finish: ${(error as Error).stack ?? error}\n`);
    return 1;
  } finally {
    // Interrupted from here on, a failed run keeps its folder as one that ends here does.
    failed = !passed;
    await client?.close().catch(() => undefined);
    // nginx first: it closes its connections to the APIs, which then stop at once.
    await nginx?.stop();
    await Promise.all(processes.map((p) => p.stop('SIGTERM')));
    await Promise.all(processes.map((p) => p.close()));
    await pool?.end().catch(() => undefined);
    await database?.stop().catch(() => undefined);
    process.off('exit', leftAtExit);
    if (passed && !options.keep) rmSync(dir, { recursive: true, force: true });
    else process.stderr.write(`deploy:check: logs, nginx files and the database are kept in ${dir}\n`);
  }
}

/** Starts an API process again on its port and waits until it is ready there (not through nginx). */
async function restart(api: GatewayProcess, port: number): Promise<void> {
  await api.start(API_READY);
  await untilReady(`http://127.0.0.1:${port}/health/ready`);
}

async function untilReady(url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // Connection: close, so that no idle connection of this probe stays open to the API.
    const ok = await request(url, { reset: true }).then(
      async (r) => {
        await r.body.dump();
        return r.statusCode === 200;
      },
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${url} was not ready within ${timeoutMs} ms`);
    await sleep(50);
  }
}

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);
