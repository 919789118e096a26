import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { SystemClock } from '#platform/clock';
import { createPool } from '#platform/database';
import { Registry } from '#payments/merchants';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { WebhookDispatcher } from '#payments/webhooks';
import type { BenchContext, BenchSection } from './run';
import { percentiles, sleep, startTimer } from './stats';
import { fixed, Table } from './table';

/**
 * Webhook deliveries per second to a local receiver (a separate Node process that
 * answers 200 at once): N deliveries are enqueued in the durable queue, then one or
 * two dispatchers (32 attempts in flight each, sharing the queue through FOR UPDATE
 * SKIP LOCKED) send them, signed, each attempt recorded, until the queue is empty.
 */
export const webhooksBench: BenchSection = {
  name: 'webhooks',
  description: 'webhook deliveries per second to a local receiver, 1 and 2 dispatchers',
  run,
};

const RECEIVER = `
const http = require('node:http');
let n = 0;
const server = http.createServer((req, res) => { req.resume(); req.on('end', () => { n++; res.writeHead(200).end('ok'); }); });
server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
process.on('SIGTERM', () => { console.log('received ' + n); process.exit(0); });
`;

async function startReceiver(): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const url = await new Promise<string>((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (c: Buffer) => {
      text += c.toString();
      const m = /listening on (\S+)/.exec(text);
      if (m) resolve(`${m[1]}/hooks`);
    });
    child.once('exit', () => reject(new Error('the receiver exited')));
  });
  return {
    url,
    stop: async () => {
      process.removeListener('exit', killOnExit);
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

async function run(context: BenchContext): Promise<Table[]> {
  const pool = createPool(context.databaseUrl, { max: 12, applicationName: 'bench-webhooks' });
  const receiver = await startReceiver();
  const clock = new SystemClock();
  // Signing only: a throw-away key seals the bench project's webhook secret.
  const registry = new Registry(pool, new SecretBox(fixedKeys([randomBytes(32)])));
  const rows: (string | number)[][] = [];
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
    const count = context.quick ? 500 : 5000;
    const body = JSON.stringify({
      id: randomUUID(),
      type: 'invoice.paid',
      createdAt: clock.now().toISOString(),
      isTest: true,
      data: { invoice: { id: randomUUID(), amount: '1000.00', status: 'paid' } },
    });
    for (const dispatchers of [1, 2]) {
      context.progress(`webhooks: enqueueing ${count} deliveries`);
      await pool.query(
        `INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
         SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, $2, $3, true, 'pending', now(), now() FROM generate_series(1, $4)`,
        [project.id, receiver.url, body, count],
      );
      const workers = Array.from({ length: dispatchers }, () => new WebhookDispatcher(pool, registry, clock, { concurrency: 32, allowPrivateNetworks: true }));
      const elapsed = startTimer();
      let stop = false;
      const loops = workers.map(async (w) => {
        while (!stop) {
          const started = await w.tick();
          if (started === 0) await sleep(2);
        }
        await w.drain();
      });
      for (;;) {
        const left = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'pending'`);
        context.progress(`webhooks: ${dispatchers} dispatcher(s), ${left.rows[0]!.n} left`);
        if (left.rows[0]!.n === '0') break;
        await sleep(50);
      }
      const seconds = elapsed() / 1000;
      stop = true;
      await Promise.all(loops);
      const attempts = await pool.query<{ duration_ms: number }>(
        `SELECT a.duration_ms FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.status = 'delivered'`,
      );
      const [p50, p99] = percentiles(
        attempts.rows.map((r) => r.duration_ms),
        [50, 99],
      );
      rows.push([dispatchers, count, fixed(0)(count / seconds), fixed(1)(p50!), fixed(1)(p99!)]);
      await pool.query('DELETE FROM webhook_attempts');
      await pool.query('DELETE FROM webhook_deliveries');
    }
  } finally {
    await receiver.stop();
    await pool.end();
  }
  return [
    {
      title: 'Webhook deliveries to a local receiver (32 in flight per dispatcher; signed, each attempt recorded)',
      headers: ['dispatchers', 'deliveries', 'deliveries/s', 'attempt p50 ms', 'attempt p99 ms'],
      rows,
      summary: rows.map(([dispatchers, , perSecond, p50, p99]) => ({
        measure: `webhook deliveries, ${dispatchers} dispatcher(s)`,
        figure: `${perSecond} deliveries/s`,
        p50: String(p50),
        p99: String(p99),
      })),
    },
  ];
}
