/**
 * The manual clock's follower sessions (ManualClockSync, in process): what happens to a
 * process stopped while it takes a new one. In process, not with startGateway, because
 * each case acts on one process's follower connection, and reads its clock; the
 * processes themselves are covered by manual-clock-processes.spec.ts.
 */
import { Client, Pool } from 'pg';
import { ManualClock, ManualClockSync } from '#platform/clock';
import { createPool } from '#platform/database';
import { createTestDatabase, TestDatabase } from '../support/test-database';

interface Proc {
  readonly name: string;
  readonly pool: Pool;
  readonly followerPool: Pool;
  readonly clock: ManualClock;
  readonly sync: ManualClockSync;
}

/** `promise`'s value, or `late` if it has not settled within `ms` (the timer cleared either way). */
const within = async <T>(promise: Promise<T>, ms: number, late: T): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<T>((resolve) => (timer = setTimeout(() => resolve(late), ms)))]);
  } finally {
    clearTimeout(timer);
  }
};

describe('manual clock follower sessions', () => {
  let db: TestDatabase;
  let admin: Client;
  const procs: Proc[] = [];

  /** A writing process as openInfrastructure makes it: a main pool, a follower pool of one session. */
  const start = async (name: string, pool = createPool(db.url, { max: 4, applicationName: name })): Promise<Proc> => {
    const followerPool = createPool(db.url, { max: 1, applicationName: `${name}-follower` });
    const clock = new ManualClock();
    const sync = new ManualClockSync(pool, clock, { followerPool });
    await sync.start();
    const proc = { name, pool, followerPool, clock, sync };
    procs.push(proc);
    return proc;
  };
  const terminateFollower = (proc: Proc) =>
    admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [`${proc.name}-follower`]);

  beforeAll(async () => {
    db = await createTestDatabase({ ownerRole: true });
    admin = new Client({ connectionString: process.env.TEST_ADMIN_DATABASE_URL });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.query(`ALTER ROLE ${db.owner} LOGIN`).catch(() => undefined);
    for (const proc of procs) {
      proc.sync.stop();
      // Not awaited past a second: a session left checked out would keep it open (dropped with the database).
      if (!proc.followerPool.ending)
        await within(
          proc.followerPool.end().catch(() => undefined),
          1000,
          undefined,
        );
      await proc.pool.end().catch(() => undefined);
    }
    await admin?.end();
    await db?.drop();
  });

  it('stop() while the follower takes a new session lets it go: the follower pool ends', async () => {
    const c = await start('proc-c');
    const session = () => (c.sync as unknown as { session: unknown }).session;
    await terminateFollower(c);
    // Its session dropped, a new one is being taken (the connect in flight).
    const deadline = Date.now() + 5000;
    while (session() !== null && Date.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
    expect(session()).toBeNull();
    // As Infrastructure.close(): stop, then end the follower pool.
    c.sync.stop();
    const ended = await within(
      c.followerPool.end().then(() => 'ended'),
      5000,
      'still open after 5 s',
    );
    expect(ended).toBe('ended');
    expect(session()).toBeNull();
  });
});
