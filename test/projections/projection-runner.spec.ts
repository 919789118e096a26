import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { comparePositions, Position, PostgresEventStore, RecordedEvent } from '#event-store';
import { Projection, ProjectionRunner, Reactor, readCheckpoint, resetForRebuild } from '#event-store/projections';
import { createPool } from '#platform/database';
import { streamCatalogProjection } from '#payments/read-models';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase();
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  await db.pool.query(`CREATE TABLE seen_events (event_id uuid PRIMARY KEY, seen_count int NOT NULL)`);
});
afterAll(async () => {
  await store.close();
  await db.drop();
});

/** Counts how often each event reached `apply`: an event applied twice shows seen_count 2. */
const countingProjection = (name: string, onApply?: (events: readonly RecordedEvent[]) => Promise<void>): Projection => ({
  name,
  tables: ['seen_events'],
  filter: { streamNamePrefixes: ['count-'] },
  async apply(tx: PoolClient, events) {
    await onApply?.(events);
    for (const e of events) {
      await tx.query(
        `INSERT INTO seen_events (event_id, seen_count) VALUES ($1, 1)
         ON CONFLICT (event_id) DO UPDATE SET seen_count = seen_events.seen_count + 1`,
        [e.id],
      );
    }
  },
});

/** The position of this file's latest append: a runner has seen everything once past it. */
let lastAppended: Position = { commit: 0n, prepare: 0n };

async function appendMany(prefix: string, streams: number, perStream: number): Promise<void> {
  for (let s = 0; s < streams; s++) {
    const result = await store.appendToStream(
      `${prefix}-${s}`,
      Array.from({ length: perStream }, (_, i) => ({ id: randomUUID(), type: `Step${i}`, data: { s, i } })),
    );
    if (comparePositions(result.position, lastAppended) > 0) lastAppended = result.position;
  }
}

/**
 * "live" means caught up with what is visible; an event just committed becomes
 * visible once older transactions of the cluster end, so wait for the checkpoint to
 * pass our own last append.
 */
async function untilProjected(runner: ProjectionRunner): Promise<void> {
  await until(async () => {
    const checkpoint = runner.status().checkpoint;
    return checkpoint !== null && comparePositions(checkpoint, lastAppended) >= 0;
  });
}

async function until(condition: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const seen = async () =>
  (await db.pool.query<{ n: number; max: number }>('SELECT count(*)::int AS n, coalesce(max(seen_count), 0)::int AS max FROM seen_events')).rows[0]!;

describe('projection runner', () => {
  beforeEach(async () => {
    await db.pool.query('TRUNCATE seen_events');
  });

  it('applies every matching event once, skips others, and stores its checkpoint', async () => {
    const projection = countingProjection(`p_${randomUUID().slice(0, 8)}`);
    await appendMany('count', 5, 4);
    await appendMany('other', 3, 2);
    const runner = new ProjectionRunner(db.pool, store, projection, { batchSize: 7 });
    runner.start();
    await until(async () => (await seen()).n === 20);
    await untilProjected(runner);
    await runner.stop();
    expect(await seen()).toEqual({ n: 20, max: 1 });
    const checkpoint = await readCheckpoint(db.pool, projection.name);
    expect(checkpoint!.position).toEqual(await store.headPosition());
  });

  it('resumes after a restart where it stopped, without applying anything twice', async () => {
    const projection = countingProjection(`p_${randomUUID().slice(0, 8)}`);
    const first = new ProjectionRunner(db.pool, store, projection, { batchSize: 5 });
    first.start();
    await untilProjected(first);
    const before = (await seen()).n;
    await first.stop();

    await appendMany('count', 2, 3);
    const second = new ProjectionRunner(db.pool, store, projection, { batchSize: 5 });
    second.start();
    await until(async () => (await seen()).n === before + 6);
    await until(async () => second.status().state === 'live');
    await second.stop();
    expect((await seen()).max).toBe(1);
  });

  it('keeps one active instance: a second runner waits in standby and takes over when the first stops', async () => {
    const projection = countingProjection(`p_${randomUUID().slice(0, 8)}`);
    const a = new ProjectionRunner(db.pool, store, projection, { standbyRetryMs: 50 });
    const b = new ProjectionRunner(db.pool, store, projection, { standbyRetryMs: 50 });
    a.start();
    await until(async () => a.status().state === 'live');
    b.start();
    await until(async () => b.status().state === 'standby');
    await a.stop();
    await appendMany('count', 1, 2);
    await until(async () => b.status().state === 'live' && (await seen()).n > 0);
    await b.stop();
    expect((await seen()).max).toBe(1);
  });

  it('a standby ends the lock session of an active instance that stopped renewing its lease, and takes over', async () => {
    const projection = countingProjection(`p_${randomUUID().slice(0, 8)}`);
    // A: renews once a minute, so its lease goes stale for B (stale after 300 ms) at once;
    // that is what B sees of a holder whose host stopped answering.
    const a = new ProjectionRunner(db.pool, store, projection, { standbyRetryMs: 50, leaseRenewMs: 60_000, holder: 'frozen-host:1' });
    const b = new ProjectionRunner(db.pool, store, projection, { standbyRetryMs: 50, leaseStaleMs: 300, holder: 'standby-host:2' });
    try {
      a.start();
      await until(async () => a.status().state === 'live');
      const frozen = (await db.pool.query<{ backend_pid: number }>('SELECT backend_pid FROM projection_leases WHERE projection = $1', [projection.name]))
        .rows[0]!;
      b.start();
      await until(async () => b.status().state === 'live');
      const lease = (
        await db.pool.query<{ holder: string; backend_pid: number }>('SELECT holder, backend_pid FROM projection_leases WHERE projection = $1', [
          projection.name,
        ])
      ).rows[0]!;
      expect(lease.holder).toBe('standby-host:2');
      expect(lease.backend_pid).not.toBe(frozen.backend_pid);
      expect((await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [frozen.backend_pid])).rowCount).toBe(0);
      // A finds its session gone and waits as a standby; B applies what comes next, once.
      await until(async () => a.status().state === 'standby');
      await appendMany('count', 2, 2);
      await untilProjected(b);
      expect((await seen()).max).toBe(1);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('a standby leaves an active instance that renews its lease alone', async () => {
    const projection = countingProjection(`p_${randomUUID().slice(0, 8)}`);
    const a = new ProjectionRunner(db.pool, store, projection, { standbyRetryMs: 50, leaseRenewMs: 50, holder: 'live-host:1' });
    const b = new ProjectionRunner(db.pool, store, projection, { standbyRetryMs: 50, leaseStaleMs: 1_000, holder: 'standby-host:2' });
    try {
      a.start();
      await until(async () => a.status().state === 'live');
      b.start();
      await until(async () => b.status().state === 'standby');
      // Many of B's tries later (one every 50 ms), A still holds it.
      await new Promise((r) => setTimeout(r, 2_500));
      expect(a.status().state).toBe('live');
      expect(b.status().state).toBe('standby');
      expect((await db.pool.query<{ holder: string }>('SELECT holder FROM projection_leases WHERE projection = $1', [projection.name])).rows[0]!.holder).toBe(
        'live-host:1',
      );
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('a batch whose checkpoint was moved by someone else is rolled back, not applied twice', async () => {
    let moved = false;
    const projection = countingProjection(`p_${randomUUID().slice(0, 8)}`, async () => {
      if (moved) return;
      moved = true;
      // Another process moves the stored checkpoint while this batch is being applied:
      // the runner's compare-and-set must fail and its whole batch roll back.
      await db.pool.query(`UPDATE projection_checkpoints SET commit_position = 1, prepare_position = 1 WHERE projection = $1`, [projection.name]);
    });
    const runner = new ProjectionRunner(db.pool, store, projection, { batchSize: 1000 });
    runner.start();
    await untilProjected(runner);
    await runner.stop();
    expect(moved).toBe(true);
    const total = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE stream_name LIKE 'count-%'`);
    expect(await seen()).toEqual({ n: total.rows[0]!.n, max: 1 });
  });

  it('takes its lock again after its session is killed, and gives the dead connection back to the pool', async () => {
    // The runner's own pool, so that its connections can be counted and killed alone.
    const applicationName = `lock-${randomUUID().slice(0, 8)}`;
    const pool = createPool(db.url, { max: 6, applicationName });
    const projection = countingProjection(`p_${randomUUID().slice(0, 8)}`);
    const runner = new ProjectionRunner(pool, store, projection, { batchSize: 1000, standbyRetryMs: 50 });
    try {
      runner.start();
      await untilProjected(runner);
      for (let restart = 0; restart < 3; restart++) {
        // What a database restart does to this process: every session ends.
        await db.pool.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [applicationName]);
        await appendMany('count', 1, 2);
        await until(async () => runner.status().state === 'live');
        await untilProjected(runner);
      }
      // Only the session holding the lock is checked out: none of the killed ones is
      // still counted against the pool. Between polls: a poll checks out a second one
      // for a moment, while a killed one that leaked would stay checked out for good.
      const checkedOut = () => pool.totalCount - pool.idleCount;
      await until(async () => checkedOut() === 1, 5_000).catch(() => undefined);
      expect({ checkedOut: checkedOut(), waiting: pool.waitingCount }).toEqual({ checkedOut: 1, waiting: 0 });
      const total = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE stream_name LIKE 'count-%'`);
      expect(await seen()).toEqual({ n: total.rows[0]!.n, max: 1 });
    } finally {
      await runner.stop();
      await pool.end();
    }
  });

  it('a failing batch is retried, never skipped', async () => {
    let failures = 2;
    const projection = countingProjection(`p_${randomUUID().slice(0, 8)}`, async () => {
      if (failures > 0) {
        failures--;
        throw new Error('read model unavailable');
      }
    });
    const runner = new ProjectionRunner(db.pool, store, projection, { batchSize: 1000 });
    runner.start();
    await until(async () => runner.status().state === 'live', 20_000);
    await untilProjected(runner);
    await runner.stop();
    expect(failures).toBe(0);
    const total = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE stream_name LIKE 'count-%'`);
    expect((await seen()).n).toBe(total.rows[0]!.n);
  });
  // /health/ready read `catching_up` with lastError null while a batch that takes long to fail was retried.
  it('a retried batch shows failing with its last error until a batch commits', async () => {
    await appendMany('count', 1, 1);
    let attempts = 0;
    let retrying = false;
    let letRetryFail!: () => void;
    const retryFails = new Promise<void>((resolve) => (letRetryFail = resolve));
    const projection = countingProjection(`p_${randomUUID().slice(0, 8)}`, async () => {
      attempts++;
      if (attempts === 1) throw new Error('canceling statement due to statement timeout');
      if (attempts === 2) {
        // A retry that takes its time to fail again (a statement timeout).
        retrying = true;
        await retryFails;
        throw new Error('canceling statement due to statement timeout');
      }
    });
    const runner = new ProjectionRunner(db.pool, store, projection, { batchSize: 1000 });
    runner.start();
    try {
      await until(async () => retrying);
      const duringRetry = runner.status();
      letRetryFail();
      expect(duringRetry).toMatchObject({ state: 'failing', lastError: 'canceling statement due to statement timeout' });
      await until(async () => runner.status().state === 'live', 20_000);
      expect(attempts).toBe(3);
      expect(runner.status().lastError).toBeNull();
    } finally {
      letRetryFail();
      await runner.stop();
    }
  });
});

describe('a reactor on the same runner', () => {
  /** Counts how often each event reached `react` (outside any transaction of the runner); `fail` may refuse a batch. */
  const countingReactor = (name: string, fail?: () => boolean): { reactor: Reactor; reacted: Map<string, number> } => {
    const reacted = new Map<string, number>();
    const reactor: Reactor = {
      name,
      filter: { streamNamePrefixes: ['react-'] },
      async react(events) {
        if (fail?.()) throw new Error('command refused for now');
        for (const e of events) reacted.set(e.id, (reacted.get(e.id) ?? 0) + 1);
      },
    };
    return { reactor, reacted };
  };
  const reactEvents = async () => (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE stream_name LIKE 'react-%'`)).rows[0]!.n;

  it('reacts to every matching event once, checkpointed: a restart goes on where it stopped, a failing batch is retried', async () => {
    const name = `r_${randomUUID().slice(0, 8)}`;
    let failures = 2;
    const { reactor, reacted } = countingReactor(name, () => failures-- > 0);
    await appendMany('react', 3, 4);
    await appendMany('other', 2, 2);
    const first = new ProjectionRunner(db.pool, store, reactor, { batchSize: 5 });
    first.start();
    await untilProjected(first);
    await first.stop();
    expect(failures).toBeLessThan(0);
    expect(reacted.size).toBe(await reactEvents());
    expect(Math.max(...reacted.values())).toBe(1);
    const stored = (await readCheckpoint(db.pool, name))!;
    expect(stored.position).toEqual(first.status().checkpoint);
    expect(stored.eventsApplied).toBe(BigInt(reacted.size));

    await appendMany('react', 1, 3);
    const second = new ProjectionRunner(db.pool, store, reactor, { batchSize: 5 });
    second.start();
    await untilProjected(second);
    await second.stop();
    expect(reacted.size).toBe(await reactEvents());
    expect(Math.max(...reacted.values())).toBe(1);
  });
});

describe('stream catalog and rebuild', () => {
  const checksum = async () =>
    (await db.pool.query<{ sum: string }>(`SELECT md5(coalesce(string_agg(c::text, '|' ORDER BY c.stream_name), '')) AS sum FROM stream_catalog c`)).rows[0]!
      .sum;

  it('catalogues every stream with its length and last event; a rebuild gives the same table', async () => {
    await appendMany('catalog', 4, 3);
    const live = new ProjectionRunner(db.pool, store, streamCatalogProjection, { batchSize: 3 });
    live.start();
    await untilProjected(live);
    await live.stop();
    const row = await db.pool.query(`SELECT * FROM stream_catalog WHERE stream_name = 'catalog-2'`);
    expect(row.rows[0]).toMatchObject({ category: 'catalog', event_count: '3', last_revision: '2', last_event_type: 'Step2' });
    const liveSum = await checksum();

    await resetForRebuild(db.pool, [streamCatalogProjection], { keepIndexes: true });
    expect((await db.pool.query('SELECT count(*)::int AS n FROM stream_catalog')).rows[0].n).toBe(0);
    const again = new ProjectionRunner(db.pool, store, streamCatalogProjection, { batchSize: 4 });
    again.start();
    await untilProjected(again);
    // The runner that finished the rebuild clears its mark once caught up (just after it moved its checkpoint there).
    await until(async () => (await readCheckpoint(db.pool, streamCatalogProjection.name))!.rebuildStartedAt === null);
    await again.stop();
    expect(await checksum()).toBe(liveSum);
  });

  it('applying the same events twice changes nothing (idempotent handler)', async () => {
    const events = await store.readAll({ maxCount: 10_000 });
    const before = await checksum();
    const client = await db.pool.connect();
    try {
      await streamCatalogProjection.apply(client, events, undefined);
    } finally {
      client.release();
    }
    expect(await checksum()).toBe(before);
  });
});

describe('a projection whose filter skips the events', () => {
  it('moves its checkpoint row at most every checkpointDeferMs (not a transaction per batch), then to the head once quiet, and on stop', async () => {
    let checkpointWrites = 0;
    const counting = Object.create(db.pool) as typeof db.pool;
    const query = db.pool.query.bind(db.pool) as (...args: unknown[]) => unknown;
    (counting as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      if (typeof args[0] === 'string' && args[0].includes('UPDATE projection_checkpoints')) checkpointWrites++;
      return query(...args);
    };
    const original = counting.connect.bind(db.pool);
    (counting as unknown as { connect: () => Promise<PoolClient> }).connect = async () => {
      const client = await original();
      const clientQuery = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        if (typeof args[0] === 'string' && args[0].includes('UPDATE projection_checkpoints')) checkpointWrites++;
        return clientQuery(...args);
      };
      return client;
    };
    const name = `skipping-${randomUUID().slice(0, 8)}`;
    const runner = new ProjectionRunner(
      counting,
      store,
      { ...countingProjection(name), filter: { streamNamePrefixes: ['never-'] } },
      { checkpointDeferMs: 300 },
    );
    runner.start();
    await until(async () => runner.status().state === 'live');
    const writesBefore = checkpointWrites;
    // 60 appends one by one, each seen in a batch of its own that the filter empties.
    const started = Date.now();
    for (let i = 0; i < 60; i++) await appendMany(`skip${i}`, 1, 1);
    await untilProjected(runner);
    const elapsed = Date.now() - started;
    const writes = checkpointWrites - writesBefore;
    // At most one per deferral period (and one more when it goes quiet), far fewer than the 60 batches.
    expect(writes).toBeLessThanOrEqual(Math.ceil(elapsed / 300) + 2);
    expect(writes).toBeLessThan(60);
    // Quiet: the row follows to what was looked at.
    await until(async () => comparePositions((await readCheckpoint(db.pool, name))!.position, runner.status().checkpoint!) === 0);
    // More skipped events, then stop at once: the row is written on the way out.
    await appendMany('skip-last', 1, 1);
    await untilProjected(runner);
    await runner.stop();
    expect((await readCheckpoint(db.pool, name))!.position).toEqual(lastAppended);
    expect((await readCheckpoint(db.pool, name))!.eventsApplied).toBe(0n);
  });
});
