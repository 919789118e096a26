import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import os from 'node:os';
import { Agent } from 'undici';
import { SystemClock } from '#platform/clock';
import { createPool } from '#platform/database';
import { Registry } from '#payments/merchants';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { WebhookDispatcher, webhookSignature } from '#payments/webhooks';
import type { BenchContext, BenchSection } from './run';
import { percentiles, startTimer } from './stats';
import { fixed, Table } from './table';

/**
 * Webhook deliveries per second to a local receiver (a separate Node process that
 * answers 200 at once): N deliveries are enqueued in the durable queue, then one or
 * two dispatchers (32 attempts in flight each, at most 8 to one URL, sharing the
 * queue through FOR UPDATE SKIP LOCKED) send them, signed, each attempt recorded,
 * until every one is delivered. The ceiling: a bare keep-alive HTTP client (undici,
 * as the dispatcher's) posting the same body to the same receiver with as many
 * requests in flight as the dispatchers may have to one URL (8 each), no database.
 * Rounds alternate the four runs; the figures are the medians of the rounds.
 *
 * Where the time goes, per 1,000 requests of each run: the CPU time of the sending
 * process (this one: the dispatchers and their database client), of PostgreSQL (every
 * process of the server, from /proc; "-" when the server is not on this machine) and
 * of the receiver, and the database statements the sending process sent.
 */
export const webhooksBench: BenchSection = {
  name: 'webhooks',
  description: 'webhook deliveries per second to a local receiver, 1 and 2 dispatchers, and a bare keep-alive client',
  run,
};

const PER_URL = 8;

const RECEIVER = `
const http = require('node:http');
let n = 0, connections = 0;
const server = http.createServer((req, res) => {
  if (req.method === 'GET') return res.end(JSON.stringify({ received: n, connections }));
  req.resume();
  req.on('end', () => { n++; res.writeHead(200).end('ok'); });
});
server.on('connection', () => connections++);
server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
process.on('SIGTERM', () => process.exit(0));
`;

interface Receiver {
  readonly url: string;
  readonly pid: number;
  /** Requests answered and connections accepted so far. */
  stats(): Promise<{ received: number; connections: number }>;
  stop(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const child = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const base = await new Promise<string>((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (c: Buffer) => {
      text += c.toString();
      const m = /listening on (\S+)/.exec(text);
      if (m) resolve(m[1]!);
    });
    child.once('exit', () => reject(new Error('the receiver exited')));
  });
  return {
    url: `${base}/hooks`,
    pid: child.pid!,
    stats: async () => (await fetch(`${base}/stats`)).json() as Promise<{ received: number; connections: number }>,
    stop: async () => {
      process.removeListener('exit', killOnExit);
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

interface Run {
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly connections: number;
  /** Per 1,000 requests: CPU ms of the sender, PostgreSQL (null: not measurable here) and the receiver, and the statements sent. */
  readonly cost: Cost;
}

interface Cost {
  readonly senderMs: number;
  readonly databaseMs: number | null;
  readonly receiverMs: number;
  readonly statements: number;
}

const TICK_MS = 10; // /proc counts CPU time in clock ticks of 1/100 s (CLK_TCK on Linux)

/** utime + stime of a process (and, with `children`, of its children it has waited for), in ms; null when it is gone. */
function processCpuMs(pid: number, children = false): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the name: state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17); fields[0] is field 3.
    const own = Number(fields[11]) + Number(fields[12]);
    return (own + (children ? Number(fields[13]) + Number(fields[14]) : 0)) * TICK_MS;
  } catch {
    return null;
  }
}

const parentOf = (pid: number): number | null => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
};

/**
 * The CPU time of the whole PostgreSQL server, in ms: the postmaster, every process it
 * started that is still running and those that ended (their time is counted in the
 * postmaster's cutime and cstime once it has waited for them). Null when the server is
 * not on this machine.
 */
function databaseCpuMs(postmaster: number | null): number | null {
  if (postmaster === null) return null;
  let total = processCpuMs(postmaster, true);
  if (total === null) return null;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || parentOf(Number(entry)) !== postmaster) continue;
    total += processCpuMs(Number(entry)) ?? 0;
  }
  return total;
}

const median = (values: readonly number[]): number => percentiles(values, [50])[0]!;

async function run(context: BenchContext): Promise<Table[]> {
  const pool = createPool(context.databaseUrl, { max: 12, applicationName: 'bench-webhooks' });
  // Every statement this process sends, counted (the dispatchers' claims, renewals and records).
  let statements = 0;
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      statements++;
      return query(...args);
    };
  });
  const receiver = await startReceiver();
  const clock = new SystemClock();
  // Signing only: a throw-away key seals the bench project's webhook secret.
  const registry = new Registry(pool, new SecretBox(fixedKeys([randomBytes(32)])));
  const count = context.quick ? 1000 : 20_000;
  const rounds = context.quick ? 1 : 3;
  const startedAt = new Date();
  const loadBefore = os.loadavg()[0]!;
  const runs = new Map<string, Run[]>();
  // The server's postmaster: the parent of a backend, when that backend is a process of this machine.
  const backend = (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const postmaster = parentOf(backend) !== null && processCpuMs(backend) !== null ? parentOf(backend) : null;
  /** Starts measuring a run's cost; the returned function gives it per 1,000 requests. */
  const measureCost = () => {
    const sender = process.cpuUsage();
    const database = databaseCpuMs(postmaster);
    const receiving = processCpuMs(receiver.pid) ?? 0;
    const sent = statements;
    return (requests: number): Cost => {
      const used = process.cpuUsage(sender);
      const databaseAfter = databaseCpuMs(postmaster);
      const per1000 = (x: number) => (x * 1000) / requests;
      return {
        senderMs: per1000((used.user + used.system) / 1000),
        databaseMs: database === null || databaseAfter === null ? null : per1000(databaseAfter - database),
        receiverMs: per1000((processCpuMs(receiver.pid) ?? 0) - receiving),
        statements: per1000(statements - sent),
      };
    };
  };
  const note = (name: string, r: Run) => runs.set(name, [...(runs.get(name) ?? []), r]);
  try {
    const account = await registry.createAccount('Bench', 'bench@example.com', clock.now());
    const { project } = await registry.createProject(
      account.id,
      {
        name: 'Bench',
        status: 'active',
        webhookUrl: receiver.url,
        webhookEvents: ['invoice.paid'],
        usdtEnabled: false,
        holdHours: 0,
        methodOverrides: {},
        customerFeeShare: 100,
      },
      clock.now(),
    );
    const body = JSON.stringify({
      id: randomUUID(),
      type: 'invoice.paid',
      createdAt: clock.now().toISOString(),
      isTest: true,
      data: { invoice: { id: randomUUID(), amount: '1000.00', status: 'paid' } },
    });

    /** The bare client: `inFlight` requests at a time over keep-alive connections, no database. */
    const ceiling = async (inFlight: number): Promise<Run> => {
      const agent = new Agent({ keepAliveTimeout: 4000 });
      const headers = {
        'x-service-signature': webhookSignature(body, registry.webhookSecretOf(project)),
        'x-service-timestamp': String(Math.floor(Date.now() / 1000)),
        'x-service-event': 'invoice.paid',
        'x-service-delivery-id': randomUUID(),
        'x-service-test': 'true',
        'content-type': 'application/json',
        'user-agent': 'payment-gateway-webhooks/1',
      };
      const target = new URL(receiver.url);
      const before = await receiver.stats();
      const latencies: number[] = [];
      let sent = 0;
      const cost = measureCost();
      const elapsed = startTimer();
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          while (sent < count) {
            sent++;
            const t0 = performance.now();
            const r = await agent.request({ origin: target.origin, path: target.pathname, method: 'POST', headers, body });
            await r.body.text();
            latencies.push(performance.now() - t0);
          }
        }),
      );
      const seconds = elapsed() / 1000;
      const used = cost(count);
      await agent.close();
      const [p50, p99] = percentiles(latencies, [50, 99]);
      return { perSecond: count / seconds, p50: p50!, p99: p99!, connections: (await receiver.stats()).connections - before.connections, cost: used };
    };

    const dispatch = async (dispatchers: number): Promise<Run> => {
      await pool.query(
        `WITH enqueued AS (
           INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
           SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, $2, $3, true, 'pending', now(), now() FROM generate_series(1, $4)
           RETURNING id, seq, url, next_attempt_at)
         INSERT INTO webhook_queue (id, seq, url, next_attempt_at, attempts_made, schedule_base)
         SELECT id, seq, url, next_attempt_at, 0, 0 FROM enqueued`,
        [project.id, receiver.url, body, count],
      );
      await pool.query('VACUUM ANALYZE webhook_deliveries, webhook_queue');
      let delivered = 0;
      let allDelivered!: () => void;
      const done = new Promise<void>((resolve) => (allDelivered = resolve));
      const workers = Array.from(
        { length: dispatchers },
        () =>
          new WebhookDispatcher(pool, registry, clock, {
            concurrency: 32,
            perUrlConcurrency: PER_URL,
            allowPrivateNetworks: true,
            onAttempt: (outcome) => {
              if (outcome === 'delivered' && ++delivered === count) allDelivered();
            },
          }),
      );
      for (const w of workers) w.onError = (error) => context.progress(`webhooks: dispatcher error: ${error.message}`);
      const before = await receiver.stats();
      const cost = measureCost();
      const elapsed = startTimer();
      for (const w of workers) w.start();
      const progress = setInterval(() => context.progress(`webhooks: ${dispatchers} dispatcher(s), ${count - delivered} left`), 1000);
      await done;
      const seconds = elapsed() / 1000;
      const used = cost(count);
      clearInterval(progress);
      await Promise.all(workers.map((w) => w.stop()));
      const after = await receiver.stats();
      const attempts = await pool.query<{ duration_ms: number }>(
        `SELECT a.duration_ms FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.status = 'delivered'`,
      );
      const [p50, p99] = percentiles(
        attempts.rows.map((r) => r.duration_ms),
        [50, 99],
      );
      await pool.query('TRUNCATE webhook_attempts, webhook_queue, webhook_deliveries');
      return { perSecond: count / seconds, p50: p50!, p99: p99!, connections: after.connections - before.connections, cost: used };
    };

    for (let round = 1; round <= rounds; round++) {
      context.progress(`webhooks: round ${round} of ${rounds}, ${count} deliveries per run`);
      note('ceiling 8', await ceiling(PER_URL));
      note('1', await dispatch(1));
      note('ceiling 16', await ceiling(2 * PER_URL));
      note('2', await dispatch(2));
    }
  } finally {
    await receiver.stop();
    await pool.end();
  }
  const loadAfter = os.loadavg()[0]!;
  const row = (name: string, what: string, inFlight: number) => {
    const r = runs.get(name)!;
    return [
      what,
      inFlight,
      count,
      fixed(0)(median(r.map((x) => x.perSecond))),
      r.map((x) => fixed(0)(x.perSecond)).join(' / '),
      fixed(1)(median(r.map((x) => x.p50))),
      fixed(1)(median(r.map((x) => x.p99))),
      median(r.map((x) => x.connections)),
      fixed(0)(median(r.map((x) => x.cost.senderMs))),
      r.every((x) => x.cost.databaseMs !== null) ? fixed(0)(median(r.map((x) => x.cost.databaseMs!))) : '-',
      fixed(0)(median(r.map((x) => x.cost.receiverMs))),
      fixed(0)(median(r.map((x) => x.cost.statements))),
    ];
  };
  const rows = [
    row('1', '1 dispatcher', PER_URL),
    row('ceiling 8', 'bare keep-alive client', PER_URL),
    row('2', '2 dispatchers', 2 * PER_URL),
    row('ceiling 16', 'bare keep-alive client', 2 * PER_URL),
  ];
  const stamp = `${startedAt.toISOString().slice(0, 16)}Z, load average ${loadBefore.toFixed(2)} → ${loadAfter.toFixed(2)}`;
  return [
    {
      title: `Webhook deliveries to a local receiver, one URL (32 in flight per dispatcher, ${PER_URL} per URL; signed, each attempt recorded) and the bare client's ceiling; medians of ${rounds} alternating round(s); ${stamp}`,
      headers: [
        'sender',
        'in flight to the URL',
        'requests',
        'per second',
        'rounds',
        'p50 ms',
        'p99 ms',
        'connections',
        'CPU ms/1000: sender',
        'PostgreSQL',
        'receiver',
        'statements/1000',
      ],
      rows,
      summary: [rows[0]!, rows[2]!].map(([what, , , perSecond, , p50, p99], i) => ({
        measure: `webhook deliveries, ${what}`,
        figure: `${perSecond} deliveries/s`,
        p50: String(p50),
        p99: String(p99),
        baseline: `${rows[i * 2 + 1]![3]}/s`,
        ratio: fixed(2)(Number(perSecond) / Number(rows[i * 2 + 1]![3])),
      })),
    },
  ];
}
