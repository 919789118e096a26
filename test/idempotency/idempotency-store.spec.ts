/**
 * The idempotency key store (IdempotencyKeys) on the real PostgreSQL, with a manual
 * clock: claim, replay, conflict, waiting for a running holder, a live holder's lease
 * renewed (and not ended by an advance of the clock), taking over a holder that stopped
 * renewing (as a dead process does), the first stored answer winning over a later one,
 * letting a key go after a 5xx, key scopes, and the 24-hour retention.
 */
import { randomUUID } from 'node:crypto';
import { ManualClock } from '#platform/clock';
import { IdempotencyKeys, KeyedRequest, readIdempotencyKey, requestFingerprint } from '#payments/idempotency';
import { Client, Pool } from 'pg';
import { poll } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';

describe('the idempotency key store', () => {
  let db: TestDatabase;
  const clock = new ManualClock();
  let keys: IdempotencyKeys;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 4 });
    keys = new IdempotencyKeys(db.pool, clock, { leaseSeconds: 5, waitMs: 2_000 });
  });
  // Stores as processes whose leases (database time) run out within a test unless renewed.
  const processes: IdempotencyKeys[] = [];
  const apiProcess = () => {
    const store = new IdempotencyKeys(db.pool, clock, { leaseSeconds: 2, waitMs: 5_000 });
    processes.push(store);
    return store;
  };
  afterAll(async () => {
    keys?.close();
    for (const store of processes) store.close();
    await db?.drop();
  });

  const keyed = (over: Partial<KeyedRequest> = {}): KeyedRequest => ({
    keyId: randomUUID(),
    projectId: randomUUID(),
    mode: 'test',
    key: randomUUID(),
    fingerprint: requestFingerprint('POST', '/v1/invoices', '{"amount":"1.00"}'),
    ...over,
  });

  it('the first request runs; its stored answer is then the answer of every repeat', async () => {
    const r = keyed();
    const first = await keys.admit(r);
    expect(first).toMatchObject({ kind: 'run', takenOver: false });
    expect(await keys.complete(r, 201, '{"id":"a"}')).toBeNull();
    expect(await keys.admit(r)).toEqual({ kind: 'replay', status: 201, body: '{"id":"a"}' });
  });

  it('requests with one key that claim it at the same instant: one runs, the others wait for it (never the table key violated)', async () => {
    // The claims are held at their insert (a trigger waiting on a lock they share) and let go together, so that
    // several get past the arbiter's check before any has inserted: rounds of 8, as concurrent API processes claim.
    const pool = new Pool({ connectionString: db.url, max: 10 });
    const store = new IdempotencyKeys(pool, clock, { leaseSeconds: 5, waitMs: 5_000 });
    const holder = new Client({ connectionString: db.url });
    await holder.connect();
    await db.pool.query(`CREATE FUNCTION claims_wait_together() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock_shared(4711); RETURN NEW; END $$`);
    await db.pool.query('CREATE TRIGGER claims_wait_together BEFORE INSERT ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION claims_wait_together()');
    try {
      for (let round = 0; round < 5; round++) {
        await holder.query('SELECT pg_advisory_lock(4711)');
        const r = keyed();
        const admissions = Array.from({ length: 8 }, () =>
          store.admit(r).then(
            (a) => a,
            (e: Error) => e.message,
          ),
        );
        await poll(
          async () => (await db.pool.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 4711 AND NOT granted`)).rows[0].n,
          (n: number) => n === 8,
          'the 8 claims waiting together',
        );
        await holder.query('SELECT pg_advisory_unlock(4711)');
        // The one that runs answers; the others get its answer.
        await new Promise((resolve) => setTimeout(resolve, 300));
        await store.complete(r, 201, `{"round":${round}}`);
        const kinds = (await Promise.all(admissions)).map((a) => (typeof a === 'string' ? a : a.kind));
        expect(kinds.sort()).toEqual(['replay', 'replay', 'replay', 'replay', 'replay', 'replay', 'replay', 'run']);
      }
    } finally {
      await db.pool.query('DROP TRIGGER IF EXISTS claims_wait_together ON idempotency_keys');
      await holder.end();
      store.close();
      await pool.end();
    }
  });

  it('another request under the key is a conflict, while it runs and after', async () => {
    const r = keyed();
    await keys.admit(r);
    const other = { ...r, fingerprint: requestFingerprint('POST', '/v1/invoices', '{"amount":"2.00"}') };
    expect(await keys.admit(other)).toEqual({ kind: 'conflict' });
    await keys.complete(r, 201, '{}');
    expect(await keys.admit(other)).toEqual({ kind: 'conflict' });
  });

  it('a repeat while the first runs waits for its answer', async () => {
    const r = keyed();
    await keys.admit(r);
    const waiting = keys.admit(r);
    await new Promise((resolve) => setTimeout(resolve, 150));
    await keys.complete(r, 202, '{"id":"rf"}');
    expect(await waiting).toEqual({ kind: 'replay', status: 202, body: '{"id":"rf"}' });
  });

  it('a repeat that outwaits a holder still within its lease is told busy', async () => {
    const patient = new IdempotencyKeys(db.pool, clock, { leaseSeconds: 600, waitMs: 200 });
    const r = keyed();
    await patient.admit(r);
    expect(await patient.admit(r)).toEqual({ kind: 'busy' });
    patient.close();
  });

  it('a live holder renews its lease: a repeat waiting longer than the lease is told busy, not let in', async () => {
    const holder = apiProcess();
    const r = keyed();
    expect(await holder.admit(r)).toMatchObject({ kind: 'run', takenOver: false });
    expect(await apiProcess().admit(r)).toEqual({ kind: 'busy' });
  });

  it('an advance of the manual clock does not end a lease (it runs on database time)', async () => {
    const patient = new IdempotencyKeys(db.pool, clock, { leaseSeconds: 600, waitMs: 200 });
    const r = keyed();
    expect(await patient.admit(r)).toMatchObject({ kind: 'run' });
    clock.setOffset(clock.offsetMilliseconds + 3_600_000);
    expect(await patient.admit(r)).toEqual({ kind: 'busy' });
    patient.close();
  });

  it('a holder that stopped renewing (its process died) is taken over once its lease runs out; the first answer stored is every answer', async () => {
    const dying = apiProcess();
    const r = keyed();
    const dead = await dying.admit(r);
    if (dead.kind !== 'run') throw new Error('not run');
    dying.close();
    const taker = await apiProcess().admit(r);
    expect(taker).toMatchObject({ kind: 'run', takenOver: true });
    // The old holder was only frozen: it answers first; the taker's answer gives way to it.
    await dying.abandon(r, dead.claim); // its claim is no longer the key's: nothing is let go
    expect(await dying.complete(r, 202, '{"by":"first"}')).toBeNull();
    expect(await keys.complete(r, 202, '{"by":"taker"}')).toEqual({ status: 202, body: '{"by":"first"}' });
    expect(await keys.admit(r)).toEqual({ kind: 'replay', status: 202, body: '{"by":"first"}' });
  });

  it("a key let go after a 5xx runs again at once on the next request, as its first pair's; another request is refused", async () => {
    const r = keyed();
    const first = await keys.admit(r);
    if (first.kind !== 'run') throw new Error('not run');
    await keys.abandon(r, first.claim);
    expect(await keys.admit({ ...r, fingerprint: 'another request' })).toEqual({ kind: 'conflict' });
    expect(await keys.admit({ ...r, keyId: randomUUID() })).toMatchObject({ kind: 'run', takenOver: true, keyId: r.keyId });
  });

  it('a release that failed with the database away (a 503 that wrote nothing) is done once it is back: the key is free', async () => {
    // The store's pool while the database is away for its DELETE (the 503's cause), back afterwards.
    let away = false;
    const pool = {
      query: (...args: Parameters<Pool['query']>) =>
        away && /^DELETE/.test(String(args[0])) ? Promise.reject(new Error('ECONNREFUSED')) : db.pool.query(...args),
    };
    const store = new IdempotencyKeys(pool as unknown as Pool, clock, { leaseSeconds: 0.6, waitMs: 2_000 });
    processes.push(store);
    const r = keyed();
    const first = await store.admit(r);
    if (first.kind !== 'run') throw new Error('not run');
    away = true;
    await expect(store.abandon(r, first.claim, true)).rejects.toThrow('ECONNREFUSED');
    away = false;
    // Retried at the store's next tick (a third of its lease): the key names any request again, not 409 for 24 hours.
    await poll(
      async () => (await db.pool.query('SELECT count(*)::int AS n FROM idempotency_keys WHERE idempotency_key = $1', [r.key])).rows[0].n,
      (n: number) => n === 0,
      'the key released',
    );
    expect(await keys.admit({ ...r, fingerprint: 'another request' })).toMatchObject({ kind: 'run', takenOver: false });
  });

  it("a release retried while the database hangs never holds up the renewal of a running request's lease", async () => {
    let deletes: 'pass' | 'fail' | 'hang' = 'pass';
    const textOf = (query: unknown) => (typeof query === 'string' ? query : (query as { text: string }).text);
    const pool = {
      query: (...args: Parameters<Pool['query']>) => {
        if (deletes === 'pass' || !/^\s*DELETE/.test(textOf(args[0]))) return db.pool.query(...args);
        return deletes === 'fail' ? Promise.reject(new Error('ECONNREFUSED')) : new Promise(() => undefined);
      },
    };
    const store = new IdempotencyKeys(pool as unknown as Pool, clock, { leaseSeconds: 0.6, waitMs: 300 });
    processes.push(store);
    const released = keyed();
    const first = await store.admit(released);
    if (first.kind !== 'run') throw new Error('not run');
    deletes = 'fail';
    await expect(store.abandon(released, first.claim, true)).rejects.toThrow('ECONNREFUSED');
    // The retried release now waits without end (a connection never given), while another request runs.
    deletes = 'hang';
    const running = keyed();
    expect(await store.admit(running)).toMatchObject({ kind: 'run' });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    // Its lease (0.6 s) renewed all along: a repeat waits for it and is told busy, never let in to run it a second time.
    expect(await keys.admit(running)).toEqual({ kind: 'busy' });
  });

  it('keys are per project and mode: another pair of the project gets the answer, and a takeover the first pair', async () => {
    const r = keyed();
    expect(await keys.admit(r)).toMatchObject({ kind: 'run', keyId: r.keyId });
    await keys.complete(r, 201, '{}');
    expect(await keys.admit({ ...r, keyId: randomUUID() })).toEqual({ kind: 'replay', status: 201, body: '{}' });
    for (const other of [
      { ...r, projectId: randomUUID(), keyId: randomUUID() },
      { ...r, mode: 'live' as const },
    ]) {
      expect(await keys.admit({ ...other, fingerprint: 'another request' })).toMatchObject({ kind: 'run', keyId: other.keyId });
    }
    // A holder that died: the retry under a new pair runs it as the first pair's request.
    const died = keyed();
    const dying = apiProcess();
    expect(await dying.admit(died)).toMatchObject({ kind: 'run', keyId: died.keyId });
    dying.close();
    expect(await apiProcess().admit({ ...died, keyId: randomUUID() })).toMatchObject({ kind: 'run', takenOver: true, keyId: died.keyId });
  });

  it('a key is kept 24 hours on the gateway clock and swept after', async () => {
    const sweeper = new IdempotencyKeys(db.pool, clock);
    const r = keyed();
    await sweeper.admit(r);
    await sweeper.complete(r, 201, '{}');
    clock.setOffset(clock.offsetMilliseconds + 24 * 3_600_000 - 60_000);
    expect(await sweeper.admit({ ...r, fingerprint: 'x' })).toEqual({ kind: 'conflict' });
    clock.setOffset(clock.offsetMilliseconds + 61_000);
    await sweeper.admit(keyed()); // a request of anyone sweeps (at most once a minute)
    expect((await db.pool.query('SELECT 1 FROM idempotency_keys WHERE key_id = $1', [r.keyId])).rowCount).toBe(0);
    expect(await sweeper.admit({ ...r, fingerprint: 'x' })).toMatchObject({ kind: 'run', takenOver: false });
    sweeper.close();
  });

  describe('reading the header', () => {
    it.each([
      ['no header', [], { kind: 'absent' }],
      ['one character', ['a'], { kind: 'key', key: 'a' }],
      ['spaces and tilde', [' ~ '], { kind: 'key', key: ' ~ ' }],
      ['255 characters', ['x'.repeat(255)], { kind: 'key', key: 'x'.repeat(255) }],
    ])('%s: %j', (_, values, expected) => {
      expect(readIdempotencyKey(values as string[])).toEqual(expected);
    });

    it.each([
      ['empty', ['']],
      ['256 characters', ['x'.repeat(256)]],
      ['a tab', ['a\tb']],
      ['Latin-1', ['é']],
      ['NUL', ['a\u0000']],
      ['sent twice', ['a', 'b']],
      ['Cyrillic', ['я']],
    ])('%s is invalid', (_, values) => {
      expect(readIdempotencyKey(values).kind).toBe('invalid');
    });
  });
});
