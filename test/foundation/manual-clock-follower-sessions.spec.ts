/**
 * The manual clock's follower sessions (ManualClockSync, in process): what happens to a
 * process whose follower session is lost and cannot be had again, to one stopped while it
 * takes a new one, and to an advance whose database fails once the offset moved. In
 * process, not with startGateway, because each case acts on one process's follower
 * connection (terminated while logins are refused) or on its pool, and reads its clock;
 * the processes themselves are covered by manual-clock-processes.spec.ts.
 */
import { Client, Pool, PoolClient } from 'pg';
import { ManualClock, ManualClockSync } from '#platform/clock';
import { createPool } from '#platform/database';
import { createTestDatabase, TestDatabase } from '../support/test-database';

interface Proc {
  readonly name: string;
  readonly pool: Pool;
  readonly followerPool: Pool;
  readonly clock: ManualClock;
  readonly sync: ManualClockSync;
  readonly warnings: string[];
  readonly infos: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
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
  const start = async (
    name: string,
    pool = createPool(db.url, { max: 4, applicationName: name }),
    followerPool = createPool(db.url, { max: 1, applicationName: `${name}-follower` }),
  ): Promise<Proc> => {
    const clock = new ManualClock();
    const warnings: string[] = [];
    const infos: string[] = [];
    const log = { warn: (_: object, message: string) => warnings.push(message), info: (_: object, message: string) => infos.push(message) };
    const sync = new ManualClockSync(pool, clock, { followerPool, log });
    await sync.start();
    const proc = { name, pool, followerPool, clock, sync, warnings, infos };
    procs.push(proc);
    return proc;
  };
  const terminateFollower = (proc: Proc) =>
    admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [`${proc.name}-follower`]);
  const storedOffset = async () => Number((await db.pool.query<{ offset_ms: string }>('SELECT offset_ms FROM manual_clock')).rows[0]!.offset_ms);

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

  it('a process whose follower session is lost and cannot be had again still follows the clock, and advances wait for it', async () => {
    const a = await start('proc-a');
    const b = await start('proc-b');
    expect((await a.sync.advance(60)).lagging).toBe(0);
    expect(b.clock.offsetMilliseconds).toBe(a.clock.offsetMilliseconds);

    // B's follower session goes (an idle-session killer, a network blip) and no new login is let in.
    await admin.query(`ALTER ROLE ${db.owner} NOLOGIN`);
    try {
      await terminateFollower(b);
      for (let round = 0; round < 4; round++) {
        const { lagging } = await a.sync.advance(3600);
        // Answered: B decides on the new time (read and recorded through its main pool).
        expect({ round, lagging, behindMs: a.clock.offsetMilliseconds - b.clock.offsetMilliseconds }).toEqual({ round, lagging: 0, behindMs: 0 });
        await sleep(300);
      }
    } finally {
      await admin.query(`ALTER ROLE ${db.owner} LOGIN`);
    }
    // Reported once while it lasted, not every poll; then B takes a follower session again.
    expect(b.warnings).toEqual([expect.stringMatching(/no follower session/)]);
    const deadline = Date.now() + 10_000;
    while (b.infos.length === 0 && Date.now() < deadline) await sleep(50);
    expect(b.infos).toEqual([expect.stringMatching(/follower session is back/)]);
    expect((await a.sync.advance(60)).lagging).toBe(0);
    expect(b.clock.offsetMilliseconds).toBe(a.clock.offsetMilliseconds);
    expect(a.warnings).toEqual([]);
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

  it('an advance whose database fails once the offset moved answers, with its live followers as lagging', async () => {
    const pool = createPool(db.url, { max: 4, applicationName: 'proc-d' });
    let moved = false;
    // The database gone right after the offset moved (the UPDATE's answer came back, on a connection of its own).
    const watched = (client: PoolClient) =>
      new Proxy(client, {
        get(target, key) {
          const value = Reflect.get(target, key) as unknown;
          if (key !== 'query') return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
          return async (...args: unknown[]) => {
            const result = await (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
            if (String(args[0]).includes('UPDATE manual_clock SET')) moved = true;
            return result;
          };
        },
      });
    const failing = new Proxy(pool, {
      get(target, key) {
        if (key === 'connect') return async () => watched(await target.connect());
        if (key !== 'query') return Reflect.get(target, key) as unknown;
        return async (...args: Parameters<Pool['query']>) => {
          if (moved) throw new Error('Connection terminated unexpectedly');
          return (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
        };
      },
    });
    const d = await start('proc-d', failing);
    const before = await storedOffset();
    const answer = await d.sync.advance(60);
    // It moved: an answer, not an error; every live follower is lagging (a, b and d at least).
    expect(await storedOffset()).toBe(before + 60_000);
    expect(answer.now.getTime()).toBeGreaterThan(0);
    expect(answer.lagging).toBeGreaterThanOrEqual(3);
    expect(d.warnings).toEqual([expect.stringMatching(/could not be counted/)]);
  });
  it('a process whose new follower session is slow to come (a connect that hangs) follows through its main pool meanwhile, and is waited for', async () => {
    const a = await start('slow-a');
    const hang = { on: false };
    const real = createPool(db.url, { max: 1, applicationName: 'slow-b-follower' });
    // As pg-pool does with its connect timeout when no connection comes (a network blackhole, a server slow to accept).
    const hanging = new Proxy(real, {
      get(target, key) {
        if (key === 'connect' && hang.on)
          return () => new Promise((_, reject) => setTimeout(() => reject(new Error('timeout exceeded when trying to connect')), 10_000));
        const value = Reflect.get(target, key) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    }) as Pool;
    const b = await start('slow-b', undefined, hanging);
    expect((await a.sync.advance(60)).lagging).toBe(0);
    hang.on = true;
    await terminateFollower(b);
    // Past the 2 s a row unconfirmed counts as a dead process's: B must have confirmed through its main pool meanwhile.
    await sleep(3000);
    const { lagging } = await a.sync.advance(3600);
    expect({ lagging, behindMs: a.clock.offsetMilliseconds - b.clock.offsetMilliseconds }).toEqual({ lagging: 0, behindMs: 0 });
    hang.on = false;
  }, 60_000);
});
