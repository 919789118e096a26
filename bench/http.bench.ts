import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { Client } from 'pg';
import type { BenchContext, BenchSection } from './run';
import { repoRoot } from './paths';
import { percentiles, sleep } from './stats';
import { fixed, integer, Table } from './table';

/**
 * HTTP throughput with autocannon on 127.0.0.1:
 *   1. POST /v1/invoices on the real gateway (the compiled `npm start` process:
 *      API, projector and workers), each request a distinct orderId;
 *   2. GET /v1/invoices/{id}, cycling over invoices created beforehand;
 *   3. the same against a baseline: a bare Fastify app with a pg Pool doing one
 *      INSERT or one SELECT by primary key per request (bench/baseline-server.ts).
 * Both servers run as child processes; autocannon runs in this process.
 *
 * BENCH_HTTP_CPU_PROF=<dir> starts the gateway with `--cpu-prof --cpu-prof-dir=<dir>`
 * (the profile is written when it stops).
 */
export const httpBench: BenchSection = {
  name: 'http',
  description: 'HTTP req/s and latency (autocannon): POST/GET /v1/invoices on the gateway vs a bare Fastify+pg baseline',
  run,
};

interface Settings {
  readonly connections: readonly number[];
  readonly warmupSeconds: number;
  readonly durationSeconds: number;
  /** Invoices (and baseline rows) created before the GET measurements. */
  readonly seedCount: number;
}

const FULL: Settings = { connections: [16, 64], warmupSeconds: 2, durationSeconds: 10, seedCount: 1_000 };
const QUICK: Settings = { ...FULL, connections: [16], durationSeconds: 3 };

const TITLE = 'HTTP throughput (autocannon on 127.0.0.1)';
const HEADERS = ['route', 'server', 'conns', 'requests', 'req/s', 'p50 ms', 'p99 ms', 'errors', 'non-2xx', 'gw/base', 'status codes'];

/** Every POST body carries a distinct orderId: bench-<counter>, one counter for the whole run. */
let orderCounter = 0;
const nextOrderBody = (): string => JSON.stringify({ amount: '1000.00', orderId: `bench-${++orderCounter}`, method: 'card' });

// ---------------------------------------------------------------------------
// Child processes (as test/support/gateway-process.ts starts them)

interface ChildServer {
  readonly name: string;
  readonly child: ChildProcess;
  readonly baseUrl: string;
  output(): string;
  /** The exit code or signal, or null while running. */
  exitCode(): number | string | null;
  /** SIGTERM, then waits for the exit (SIGKILL after 20 s); resolves with the code or signal. */
  stop(): Promise<number | string>;
}

async function startServer(name: string, script: string, env: Record<string, string>, nodeArgs: readonly string[] = []): Promise<ChildServer> {
  const root = repoRoot();
  const child = spawn(process.execPath, [...nodeArgs, path.join(root, script)], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // If the bench is interrupted (Ctrl-C, SIGTERM), its servers must not outlive it.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  child.once('exit', () => process.removeListener('exit', killOnExit));
  let text = '';
  let wake: () => void = () => undefined;
  const onData = (chunk: Buffer) => {
    text += chunk.toString('utf8');
    wake();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  let exitedWith: number | string | null = null;
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => {
      exitedWith = code ?? signal ?? 'unknown';
      resolve(exitedWith);
      wake();
    });
  });

  const stop = async (): Promise<number | string> => {
    if (exitedWith !== null) return exitedWith;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  };

  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} did not print its address within 60 s; output:\n${text}`)), 60_000);
      wake = () => {
        const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(text);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        } else if (exitedWith !== null) {
          clearTimeout(timer);
          reject(new Error(`${name} exited (${exitedWith}) before listening; output:\n${text}`));
        }
      };
      wake();
    });
    wake = () => undefined;
    return { name, child, baseUrl: url, output: () => text, exitCode: () => exitedWith, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

// ---------------------------------------------------------------------------
// Small HTTP client for the set-up (fetch, Node >= 20)

async function call(
  baseUrl: string,
  method: 'GET' | 'POST',
  route: string,
  token: string | null,
  body?: unknown,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON body of any shape
): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${baseUrl}${route}`, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body: parsed };
}

async function expectStatus(
  what: string,
  expected: number,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON body of any shape
  pending: Promise<{ status: number; body: any }>,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON body of any shape
): Promise<any> {
  const { status, body } = await pending;
  if (status !== expected) throw new Error(`${what}: expected ${expected}, got ${status}: ${JSON.stringify(body)}`);
  return body;
}

/** Creates `count` invoices (or baseline rows) with `concurrency` requests in flight; returns their ids. */
async function seed(count: number, concurrency: number, create: () => Promise<string>): Promise<string[]> {
  const ids: string[] = [];
  let started = 0;
  const worker = async () => {
    while (started < count) {
      started++;
      ids.push(await create());
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return ids;
}

// ---------------------------------------------------------------------------
// Measurements

interface Target {
  readonly route: string;
  readonly server: 'gateway' | 'baseline';
  readonly kind: 'POST' | 'GET';
  readonly baseUrl: string;
  readonly request: autocannon.Request;
  /** The status every response must have. */
  readonly expectedStatus: number;
  /** Waits until the server is quiet before a measurement (the gateway: projections caught up). */
  settle(): Promise<void>;
}

interface Measurement {
  readonly target: Target;
  readonly connections: number;
  readonly requests: number;
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly non2xx: number;
  readonly statusCodes: ReadonlyMap<number, number>;
  /** Connection errors by code (ECONNREFUSED, ...) or message. */
  readonly errorKinds: ReadonlyMap<string, number>;
}

function cannon(
  target: Target,
  connections: number,
  seconds: number,
  onResponse?: (statusCode: number, responseTime: number) => void,
  onError?: (error: unknown) => void,
): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: target.baseUrl,
        connections,
        duration: seconds,
        requests: [target.request],
      },
      (error: unknown, result) => (error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(result)),
    );
    if (onResponse) instance.on('response', (_client, statusCode, _bytes, responseTime) => onResponse(statusCode, responseTime));
    if (onError) instance.on('reqError', onError);
  });
}

async function measure(target: Target, connections: number, settings: Settings): Promise<Measurement> {
  await target.settle();
  await cannon(target, connections, settings.warmupSeconds);
  await target.settle();
  const latencies: number[] = [];
  const statusCodes = new Map<number, number>();
  const errorKinds = new Map<string, number>();
  const result = await cannon(
    target,
    connections,
    settings.durationSeconds,
    (statusCode, responseTime) => {
      latencies.push(responseTime);
      statusCodes.set(statusCode, (statusCodes.get(statusCode) ?? 0) + 1);
    },
    (error) => {
      const kind = String((error as { code?: unknown })?.code ?? (error as Error)?.message ?? error);
      errorKinds.set(kind, (errorKinds.get(kind) ?? 0) + 1);
    },
  );
  const [p50, p99] = percentiles(latencies, [50, 99]);
  const requests = latencies.length;
  return {
    target,
    connections,
    requests,
    // result.duration is the run's real length: autocannon stops on its first 1 s sample
    // after `duration`, so a 10 s run lasts 10 or 11 s; the responses counted span the same.
    perSecond: requests / (result.duration || settings.durationSeconds),
    p50: p50!,
    p99: p99!,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    statusCodes,
    errorKinds,
  };
}

// ---------------------------------------------------------------------------

/**
 * A fresh database of this section's own on the run's server: the gateway must not
 * start on the log the other sections filled (its projections would first catch up
 * on a million events).
 */
async function ownDatabase(runDatabaseUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `bench_http_${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: runDatabaseUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(runDatabaseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new Client({ connectionString: runDatabaseUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

async function run(runContext: BenchContext): Promise<Table[]> {
  const own = await ownDatabase(runContext.databaseUrl);
  try {
    return await runOn({ ...runContext, databaseUrl: own.url });
  } finally {
    await own.drop();
  }
}

async function runOn(context: BenchContext): Promise<Table[]> {
  const settings = context.quick ? QUICK : FULL;
  const notes: string[] = [];
  const db = new Client({ connectionString: context.databaseUrl, application_name: 'gateway-bench-http' });
  await db.connect();
  const children: ChildServer[] = [];
  try {
    await db.query(`CREATE TABLE IF NOT EXISTS bench_baseline (
      id uuid PRIMARY KEY,
      order_id text NOT NULL UNIQUE,
      body jsonb NOT NULL,
      created_at timestamptz NOT NULL
    )`);
    await db.query('TRUNCATE bench_baseline');

    const adminToken = randomBytes(24).toString('base64url'); // 32 characters
    const profileDir = process.env.BENCH_HTTP_CPU_PROF;
    const gatewayArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profileDir)}`] : [];
    context.progress(`http: starting the gateway (dist/apps/gateway/src/main.js)${profileDir ? `, CPU profile to ${profileDir}` : ''}`);
    const gateway = await startServer(
      'gateway',
      'dist/apps/gateway/src/main.js',
      // Throughput, not the limiter: the spec's 60 requests/s per key and 3 s poll interval are lifted.
      {
        PORT: '0',
        DATABASE_URL: context.databaseUrl,
        ADMIN_TOKEN: adminToken,
        LOG_LEVEL: 'warn',
        RATE_LIMIT_PER_SECOND: '100000000',
        POLL_INTERVAL_SECONDS: '0',
      },
      gatewayArgs,
    );
    children.push(gateway);
    context.progress('http: starting the baseline server (dist/bench/baseline-server.js)');
    const baseline = await startServer('baseline', 'dist/bench/baseline-server.js', {
      PORT: '0',
      DATABASE_URL: context.databaseUrl,
    });
    children.push(baseline);

    // A merchant: account, project, test secret key (operator API).
    const account = await expectStatus(
      'POST /admin/v1/accounts',
      201,
      call(gateway.baseUrl, 'POST', '/admin/v1/accounts', adminToken, { name: 'Bench merchant', email: 'bench@example.com' }),
    );
    const project = await expectStatus(
      'POST /admin/v1/projects',
      201,
      call(gateway.baseUrl, 'POST', '/admin/v1/projects', adminToken, { accountId: account.id, name: 'Bench project' }),
    );
    const secretKey: string = project.keys.test.secretKey;
    const authorization = `Bearer ${secretKey}`;

    // The gateway is quiet when its projections have applied the whole log. A projection
    // that is failing (e.g. on events another section left in the log that are not the
    // gateway's) or that stops moving is noted and no longer waited for.
    const givenUp = new Set<string>();
    const settleGateway = async (): Promise<void> => {
      const started = Date.now();
      let lastProgress = started;
      let lastBehind = '';
      for (;;) {
        if (gateway.exitCode() !== null) throw new Error(`the gateway exited (${gateway.exitCode()}); output:\n${gateway.output()}`);
        const { rows } = await db.query<{ projection: string; position: string; head: string }>(
          `SELECT projection, prepare_position AS position, (SELECT coalesce(max(global_position), 0) FROM events) AS head
           FROM projection_checkpoints`,
        );
        const ready = await call(gateway.baseUrl, 'GET', '/health/ready', null);
        const states = new Map<string, { state: string; lastError: string | null }>(
          ((ready.body?.projections ?? []) as { projection: string; state: string; lastError: string | null }[]).map((p) => [p.projection, p]),
        );
        const behind = rows.filter((r) => BigInt(r.position) < BigInt(r.head) && !givenUp.has(r.projection));
        for (const r of behind) {
          const status = states.get(r.projection);
          if (status?.state === 'failing') {
            givenUp.add(r.projection);
            notes.push(`projection ${r.projection} of the gateway is failing, not waited for: ${(status.lastError ?? '').slice(0, 200)}`);
          }
        }
        const waiting = behind.filter((r) => !givenUp.has(r.projection));
        if (waiting.length === 0) break;
        const signature = waiting.map((r) => `${r.projection}@${r.position}`).join(',');
        if (signature !== lastBehind) {
          lastBehind = signature;
          lastProgress = Date.now();
        } else if (Date.now() - lastProgress > 30_000) {
          for (const r of waiting) {
            givenUp.add(r.projection);
            notes.push(`projection ${r.projection} of the gateway stopped at ${r.position} of ${r.head} for 30 s, not waited for`);
          }
          break;
        }
        await sleep(200);
      }
      const waited = Date.now() - started;
      if (waited >= 1_000) context.progress(`http: waited ${(waited / 1000).toFixed(1)} s for the gateway's projections`);
      await db.query('CHECKPOINT').catch(() => undefined);
    };
    const settleBaseline = async (): Promise<void> => {
      await db.query('CHECKPOINT').catch(() => undefined);
    };

    context.progress(`http: seeding ${settings.seedCount} invoices and ${settings.seedCount} baseline rows`);
    let seedCounter = 0;
    const invoiceIds = await seed(settings.seedCount, 16, async () => {
      const body = await expectStatus(
        'POST /v1/invoices (seed)',
        201,
        call(gateway.baseUrl, 'POST', '/v1/invoices', secretKey, {
          amount: '1000.00',
          orderId: `seed-${++seedCounter}`,
          method: 'card',
        }),
      );
      return body.id as string;
    });
    const baselineIds = await seed(settings.seedCount, 16, async () => {
      const body = await expectStatus(
        'POST /baseline (seed)',
        201,
        call(baseline.baseUrl, 'POST', '/baseline', null, { amount: '1000.00', orderId: `seed-${++seedCounter}`, method: 'card' }),
      );
      return body.id as string;
    });
    // Sanity: the first of each answers 200.
    await expectStatus('GET /v1/invoices/{id}', 200, call(gateway.baseUrl, 'GET', `/v1/invoices/${invoiceIds[0]}`, secretKey));
    await expectStatus('GET /baseline/{id}', 200, call(baseline.baseUrl, 'GET', `/baseline/${baselineIds[0]}`, null));

    const cycling = (ids: readonly string[], prefix: string) => {
      let next = 0;
      return (request: autocannon.Request): autocannon.Request => ({ ...request, path: `${prefix}${ids[next++ % ids.length]}` });
    };
    const postRequest = (routePath: string, headers: Record<string, string>): autocannon.Request => ({
      method: 'POST',
      path: routePath,
      headers: { ...headers, 'content-type': 'application/json' },
      setupRequest: (request) => ({ ...request, body: nextOrderBody() }),
    });

    const targets: Target[] = [
      {
        route: 'POST /v1/invoices',
        server: 'gateway',
        kind: 'POST',
        baseUrl: gateway.baseUrl,
        request: postRequest('/v1/invoices', { authorization }),
        expectedStatus: 201,
        settle: settleGateway,
      },
      {
        route: 'POST /baseline',
        server: 'baseline',
        kind: 'POST',
        baseUrl: baseline.baseUrl,
        request: postRequest('/baseline', {}),
        expectedStatus: 201,
        settle: settleBaseline,
      },
      {
        route: 'GET /v1/invoices/{id}',
        server: 'gateway',
        kind: 'GET',
        baseUrl: gateway.baseUrl,
        request: { method: 'GET', path: '/v1/invoices/', headers: { authorization }, setupRequest: cycling(invoiceIds, '/v1/invoices/') },
        expectedStatus: 200,
        settle: settleGateway,
      },
      {
        route: 'GET /baseline/{id}',
        server: 'baseline',
        kind: 'GET',
        baseUrl: baseline.baseUrl,
        request: { method: 'GET', path: '/baseline/', setupRequest: cycling(baselineIds, '/baseline/') },
        expectedStatus: 200,
        settle: settleBaseline,
      },
    ];

    const measurements: Measurement[] = [];
    for (const connections of settings.connections) {
      for (const target of targets) {
        context.progress(
          `http: ${target.route} (${target.server}), ${connections} connections, ${settings.warmupSeconds} s warm-up + ${settings.durationSeconds} s`,
        );
        const m = await measure(target, connections, settings);
        for (const child of children) {
          if (child.exitCode() !== null) throw new Error(`${child.name} exited (${child.exitCode()}) during ${target.route}; output:\n${child.output()}`);
        }
        measurements.push(m);
        const unexpected = [...m.statusCodes].filter(([code]) => code !== target.expectedStatus);
        if (unexpected.length > 0 || m.errors > 0) {
          notes.push(
            `${target.route} (${target.server}, ${connections} conns): ${unexpected.map(([c, n]) => `${n} x ${c}`).join(', ') || 'no unexpected status'}` +
              `; ${m.errors} connection errors (${m.timeouts} timeouts${[...m.errorKinds].map(([k, n]) => `, ${n} x ${k}`).join('')})` +
              `; expected ${target.expectedStatus} only`,
          );
        }
      }
    }

    const ms = fixed(2);
    const rows = measurements.map((m) => {
      let ratio = '-';
      if (m.target.server === 'gateway') {
        const base = measurements.find((b) => b.target.server === 'baseline' && b.target.kind === m.target.kind && b.connections === m.connections);
        if (base && base.perSecond > 0) ratio = fixed(2)(m.perSecond / base.perSecond);
      }
      const codes = [...m.statusCodes]
        .sort(([a], [b]) => a - b)
        .map(([code, n]) => `${code}:${n}`)
        .join(' ');
      return [m.target.route, m.target.server, m.connections, m.requests, integer(m.perSecond), ms(m.p50), ms(m.p99), m.errors, m.non2xx, ratio, codes || '-'];
    });

    const cores = os.cpus().length;
    const footnote = [
      `Notes: autocannon (this process), the gateway, the baseline server and PostgreSQL all run on this machine's ${cores} cores,`,
      `  shared by everything: the figures compare the two servers, they are not a capacity. ${settings.warmupSeconds} s warm-up (discarded), then ${settings.durationSeconds} s per row.`,
      `  gateway: the compiled \`npm start\` process (API + projector + workers; pg pool 20). baseline: bare Fastify + pg Pool(20) in a child process,`,
      `  one INSERT (POST) or one SELECT by primary key (GET) per request. POST: each body a distinct orderId; GET cycles over ${settings.seedCount} ids created beforehand.`,
      '  latency: per response (all status codes), nearest rank. errors: connection errors and timeouts. gw/base: gateway req/s over baseline req/s, same route kind and connections.',
      "  Before each warm-up and each run: the gateway's projections caught up with the log, then a CHECKPOINT.",
      ...notes.map((n) => `  ! ${n}`),
    ];
    const summary = measurements
      .filter((m) => m.target.server === 'gateway')
      .map((m) => {
        const base = measurements.find((b) => b.target.server === 'baseline' && b.target.kind === m.target.kind && b.connections === m.connections);
        return {
          measure: `${m.target.route}, ${m.connections} connections`,
          figure: `${integer(m.perSecond)} req/s`,
          p50: ms(m.p50),
          p99: ms(m.p99),
          baseline: base ? `${integer(base.perSecond)} req/s` : undefined,
          ratio: base && base.perSecond > 0 ? fixed(2)(m.perSecond / base.perSecond) : undefined,
        };
      });
    return [
      { title: TITLE, headers: HEADERS, rows, summary },
      // Printed as plain lines: a title, a one-column "header", one row per further line.
      { title: footnote[0]!, headers: [footnote[1]!], rows: footnote.slice(2).map((line) => [line]) },
    ];
  } finally {
    for (const child of children.reverse()) {
      const code = await child.stop();
      if (code !== 0) context.progress(`http: ${child.name} exited with ${code}; the end of its output:\n${child.output().slice(-4000)}`);
    }
    await db.query('DROP TABLE IF EXISTS bench_baseline').catch(() => undefined);
    await db.end();
  }
}
