import { randomUUID } from 'node:crypto';
import { comparePositions, PostgresEventStore } from '#event-store';
import { readCheckpoint } from '#event-store/projections';
import { startProcess } from '../support/gateway-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { visibleHead } from '../support/project-to-head';

const STREAMS = 300;
const EVENTS_PER_STREAM = 100;

describe('projections:rebuild killed mid-way', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    for (let s = 0; s < STREAMS; s++) {
      await store.appendToStream(
        `account-${s}`,
        Array.from({ length: EVENTS_PER_STREAM }, (_, i) => ({ id: randomUUID(), type: `Posted${i % 7}`, data: { s, i } })),
      );
    }
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  const checksum = async () =>
    (
      await db.pool.query<{ sum: string; n: number }>(
        `SELECT md5(coalesce(string_agg(c::text, '|' ORDER BY c.stream_name), '')) AS sum, count(*)::int AS n FROM stream_catalog c`,
      )
    ).rows[0]!;

  it('ends, after a restart of the projector, with the same read model as an uninterrupted rebuild', async () => {
    const env = { DATABASE_URL: db.url };
    const total = STREAMS * EVENTS_PER_STREAM;

    // 1. Start a rebuild with small batches and SIGKILL it part-way.
    const interrupted = startProcess('rebuild', env, ['stream_catalog', '--batch-size', '25']);
    let appliedAtKill = 0n;
    for (;;) {
      const row = await readCheckpoint(db.pool, 'stream_catalog');
      if (row && row.rebuildStartedAt && row.eventsApplied >= BigInt(total / 10)) {
        interrupted.child.kill('SIGKILL');
        appliedAtKill = row.eventsApplied;
        break;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(await interrupted.exited).toBe('SIGKILL');
    const atKill = await readCheckpoint(db.pool, 'stream_catalog');
    expect(atKill!.eventsApplied).toBeLessThan(BigInt(total));
    expect(atKill!.eventsApplied).toBeGreaterThanOrEqual(appliedAtKill);

    // 2. Start the projector: it resumes from the last committed batch.
    const projector = startProcess('projector', env);
    const head = (await visibleHead(db.pool, store))!;
    const deadline = Date.now() + 60_000;
    for (;;) {
      const row = await readCheckpoint(db.pool, 'stream_catalog');
      if (row && comparePositions(row.position, head) >= 0) break;
      if (Date.now() > deadline) throw new Error(`projector did not finish; output:\n${projector.output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await projector.kill();
    const resumed = await checksum();
    const resumedCheckpoint = await readCheckpoint(db.pool, 'stream_catalog');
    expect(resumedCheckpoint!.eventsApplied).toBe(BigInt(total));
    expect(resumed.n).toBe(STREAMS);

    // 3. An uninterrupted rebuild gives the same table.
    const clean = startProcess('rebuild', env, ['stream_catalog']);
    expect(await clean.exited).toBe(0);
    expect(clean.output()).toContain(`rebuilt stream_catalog: ${total} events`);
    expect(await checksum()).toEqual(resumed);
  });

  it('refuses an unknown projection name', async () => {
    const proc = startProcess('rebuild', { DATABASE_URL: db.url }, ['no_such_projection']);
    expect(await proc.exited).toBe(2);
    expect(proc.output()).toContain('unknown projection no_such_projection; known: stream_catalog');
  });
});
