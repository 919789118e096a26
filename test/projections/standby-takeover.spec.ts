/**
 * Standby takeover when the active projector stops answering (real processes, the
 * real PostgreSQL): two projector processes share one database; the one holding
 * `stream_catalog` is frozen with SIGSTOP (its sessions stay open, its kernel still
 * answers TCP keepalive probes, exactly what a hung host looks like to the server).
 * Its lease goes stale, the other process ends its lock session and takes the
 * projection over within the documented bound, and the read model moves on. After
 * SIGCONT the old process finds its session gone, becomes a standby, and nothing was
 * applied twice. Before leases the frozen process kept every projection it held.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { PostgresEventStore } from '#event-store';
import { PROJECTION_LEASE_STALE_MS, PROJECTION_TAKEOVER_BOUND_MS } from '#event-store/projections';
import { ADMIN_TOKEN, api, Json } from '../support/merchant-fixtures';
import { RunningProcess, startProcess, PROJECTOR_PUBLIC_URL } from '../support/gateway-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** Scheduling on a shared 2-core machine: how late a standby's timer may fire on top of the bound. */
const SCHEDULING_TOLERANCE_MS = 5_000;

let db: TestDatabase;
let store: PostgresEventStore;
const processes: RunningProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase({ poolSize: 4 });
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 20 });
});
afterAll(async () => {
  for (const p of processes) {
    p.child.kill('SIGCONT');
    await p.kill('SIGKILL');
  }
  await store.close();
  await db.drop();
});

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not in time (last: ${JSON.stringify(value)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Lease {
  holder: string;
  backend_pid: number;
  acquired_at: Date;
  renewed_at: Date;
}
const lease = async (projection: string): Promise<Lease | null> =>
  (await db.pool.query<Lease>('SELECT holder, backend_pid, acquired_at, renewed_at FROM projection_leases WHERE projection = $1', [projection])).rows[0] ??
  null;

/** Appends `count` events to a new stream; answers its name. */
async function appendStream(count: number): Promise<string> {
  const stream = `probe-${randomUUID()}`;
  await store.appendToStream(
    stream,
    Array.from({ length: count }, (_, i) => ({ id: randomUUID(), type: 'Probed', data: { i } })),
  );
  return stream;
}

const catalogued = async (stream: string): Promise<number> =>
  Number((await db.pool.query<{ n: string }>('SELECT event_count AS n FROM stream_catalog WHERE stream_name = $1', [stream])).rows[0]?.n ?? 0);

it('a frozen active projector loses its projections to the standby within the bound; back, it applies nothing twice', async () => {
  const started = [0, 1].map(() => startProcess('projector', { DATABASE_URL: db.url, ADMIN_TOKEN, METRICS_PORT: '0', PUBLIC_URL: PROJECTOR_PUBLIC_URL }));
  processes.push(...started);
  const metricsUrls = await Promise.all(
    started.map(async (p) => (await p.waitForOutput(/metrics and health \(METRICS_PORT, no token\): (http:\/\/127\.0\.0\.1:\d+)\/metrics/))[1]!),
  );
  const holderOf = (p: RunningProcess) => `${hostname()}:${p.child.pid}`;

  // One of them is the active instance of stream_catalog (its readiness says so), and it works.
  const first = await appendStream(5);
  await until(
    () => catalogued(first),
    (n) => n === 5,
    'the first stream catalogued',
  );
  const stateOf = async (url: string): Promise<string | undefined> =>
    ((await api(url).get('/health/ready')).body.projections as Json[] | undefined)?.find((p) => p.projection === 'stream_catalog')?.state;
  const states = await until(
    () => Promise.all(metricsUrls.map(stateOf)),
    (s) => s.filter((state) => state === 'live').length === 1 && s.includes('standby'),
    'one process live on stream_catalog, the other its standby',
  );
  const activeIndex = states.indexOf('live');
  const active = started[activeIndex]!;
  const standby = started[1 - activeIndex]!;

  active.child.kill('SIGSTOP');
  // Its last renewal is the one the standby will judge (a renewal already sent when it
  // stopped still lands: read it a moment later).
  await new Promise((r) => setTimeout(r, 1_000));
  const lastRenewal = await lease('stream_catalog');
  const second = await appendStream(7);

  // The read model moves on without the frozen process.
  await until(
    () => catalogued(second),
    (n) => n === 7,
    'the second stream catalogued by the standby',
    40_000,
  );
  const taken = (await lease('stream_catalog'))!;
  expect(lastRenewal!.holder).toBe(holderOf(active));
  expect(taken.holder).toBe(holderOf(standby));
  const tookMs = taken.acquired_at.getTime() - lastRenewal!.renewed_at.getTime();
  process.stdout.write(`takeover ${tookMs} ms after the frozen holder's last renewal (bound ${PROJECTION_TAKEOVER_BOUND_MS} ms)\n`);
  // Never before the lease went stale (a live holder is not taken over) ...
  expect(tookMs).toBeGreaterThanOrEqual(PROJECTION_LEASE_STALE_MS);
  // ... and within the documented bound (plus how late a timer fires on this machine).
  expect(tookMs).toBeLessThanOrEqual(PROJECTION_TAKEOVER_BOUND_MS + SCHEDULING_TOLERANCE_MS);
  // The frozen holder's lock session was ended by the standby.
  expect((await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [lastRenewal!.backend_pid])).rowCount).toBe(0);

  active.child.kill('SIGCONT');
  const third = await appendStream(3);
  await until(
    () => catalogued(third),
    (n) => n === 3,
    'the third stream catalogued',
  );
  // The old process is back as a standby of stream_catalog; the new holder keeps it.
  await until(
    () => stateOf(metricsUrls[activeIndex]!),
    (state) => state === 'standby',
    'the old process to be a standby of stream_catalog',
  );
  expect(await stateOf(metricsUrls[1 - activeIndex]!)).toBe('live');
  expect((await lease('stream_catalog'))!.holder).toBe(holderOf(standby));

  // Nothing applied twice: stream_catalog has no filter, so the events it counted as
  // applied are exactly the events of the log up to its checkpoint.
  await until(
    async () =>
      (
        await db.pool.query<{ applied: string; logged: string }>(
          `SELECT c.events_applied AS applied,
                  (SELECT count(*) FROM events e WHERE (e.transaction_id::text::numeric, e.global_position) <= (c.commit_position, c.prepare_position)) AS logged
           FROM projection_checkpoints c WHERE c.projection = 'stream_catalog'`,
        )
      ).rows[0]!,
    (r) => r.applied === r.logged && Number(r.logged) >= 15,
    'the applied count to equal the log up to the checkpoint',
    10_000,
  );
  for (const [stream, count] of [
    [first, 5],
    [second, 7],
    [third, 3],
  ] as const) {
    expect(await catalogued(stream)).toBe(count);
  }
}, 120_000);
