/**
 * What the dispatcher's claims take, and how much of the queue they read (real
 * PostgreSQL, decision 0094). A claim must not read a left-out URL's backlog row by row:
 * with one URL's thousands of due deliveries in hand, a claim still finds the other
 * URLs' due deliveries behind them, within each URL's cap, reading a bounded number of
 * the queue's rows whatever that backlog; with thousands of URLs of one due row each it
 * takes the earliest; a URL behind a backlog and more URLs than one claim visits is
 * still reached within a few claims; every claimed row gets a lease and a token of its
 * own, and another dispatcher takes none of them; a row leased by another after a
 * claim's snapshot and before the claim locks it is not taken (the due re-check).
 *
 * How much a claim reads is counted by PostgreSQL itself (rows of `webhook_queue` and
 * `webhook_deliveries` returned by sequential scans and fetched by index scans, in the claim's own
 * transaction): the test's pool runs each claim statement once more, with the same
 * values, in a transaction it rolls back, just before the dispatcher's own. The
 * attempts hang (a poster the test never answers), so what is claimed stays claimed.
 *
 * Dispatchers here run with `slowStart: false` (every URL has all its slots at once):
 * these tests are about claims and records; slow start has its own in dispatcher-batches.spec.ts.
 */
import { randomBytes } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { ManualClock } from '#platform/clock';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { Registry } from '#payments/merchants';
import { AttemptResult, CLAIM_EARLIEST, WebhookDispatcher, WebhookPoster } from '#payments/webhooks';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { webhookProject } from '../support/webhook-project';
import { rehearsingPool } from '../support/rehearsing-pool';
import { emptyWebhookTables, queued } from '../support/webhook-queue';

let db: TestDatabase;
let registry: Registry;
let projectId: string;
const now = Date.now() - 60_000;
const clock = new ManualClock(() => now);

beforeAll(async () => {
  db = await createTestDatabase();
  registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
  projectId = (await webhookProject(registry, clock.now())).id;
});
afterAll(async () => {
  await db.drop();
});
afterEach(() => emptyWebhookTables(db.pool));

/** `count` due deliveries to `url`, the first due `firstDueMs` from the clock, one millisecond apart; answers their ids in due order. */
async function enqueue(url: string, count: number, firstDueMs: number, bodyBytes = 2): Promise<string[]> {
  const r = await db.pool.query<{ id: string }>(
    queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
     SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, $2, rpad('{}', $5, ' '), true, 'pending', $3::timestamptz + i * interval '1 ms', $3
     FROM generate_series(0, $4 - 1) AS i`),
    [projectId, url, new Date(now + firstDueMs), count, bodyBytes],
  );
  return r.rows.map((row) => row.id);
}

/** One due delivery to each of `count` URLs (`${prefix}${n}`), due one millisecond apart from `firstDueMs`; ids in due order. */
async function enqueueManyUrls(prefix: string, count: number, firstDueMs: number): Promise<string[]> {
  const r = await db.pool.query<{ id: string }>(
    queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
     SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, $2 || lpad(i::text, 5, '0') || '/hooks', '{}', true, 'pending',
            $3::timestamptz + i * interval '1 ms', $3
     FROM generate_series(0, $4 - 1) AS i`),
    [projectId, prefix, new Date(now + firstDueMs), count],
  );
  return r.rows.map((row) => row.id);
}

/** A poster that answers only when the test lets go (`release`: a 500 each): every claimed delivery stays in the dispatcher's hand. */
function hangingPoster(): WebhookPoster & { readonly posted: string[]; release(): void } {
  const posted: string[] = [];
  const answers: ((result: AttemptResult) => void)[] = [];
  let released = false;
  const failed: AttemptResult = { statusCode: 500, body: null, durationMs: 1, error: null };
  return {
    posted,
    post: (url) => {
      posted.push(url);
      return new Promise<AttemptResult>((resolve) => (released ? resolve(failed) : answers.push(resolve)));
    },
    release: () => {
      released = true;
      for (const answer of answers.splice(0)) answer(failed);
    },
    close: async () => undefined,
  };
}

/**
 * Rows of the queue read so far by this session (counts not yet sent to the statistics
 * included): heap rows returned by sequential scans, and entries returned by the scans
 * of each of its indexes.
 */
async function rowsOfTheQueueRead(client: PoolClient): Promise<number> {
  const r = await client.query<{ n: string }>(
    `SELECT sum(pg_stat_get_xact_tuples_returned(c.oid)) AS n FROM pg_class c
     WHERE c.oid IN ('webhook_queue'::regclass, 'webhook_deliveries'::regclass)
        OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN ('webhook_queue'::regclass, 'webhook_deliveries'::regclass))`,
  );
  return Number(r.rows[0]!.n);
}

const isClaim = (text: string) => /FOR UPDATE (OF d )?SKIP LOCKED/.test(text) && /lease_token = gen_random_uuid\(\)/.test(text);

/**
 * The pool with every claim statement run once more before the real one, in a
 * transaction rolled back, to count the rows of `webhook_queue` and `webhook_deliveries` it read
 * (pushed to `rowsRead`).
 */
function countingPool(pool: Pool, rowsRead: number[]): Pool {
  return rehearsingPool(pool, isClaim, async (client, run) => {
    const before = await rowsOfTheQueueRead(client);
    await run();
    rowsRead.push((await rowsOfTheQueueRead(client)) - before);
  });
}

/** A dispatcher of 16 slots, 2 per URL and 4 claimed ahead per URL (at most 6 of one URL), whose every claim looks behind the earliest rows. */
function dispatcher(pool: Pool, poster: WebhookPoster, pollIntervalMs = 0): WebhookDispatcher {
  return new WebhookDispatcher(pool, registry, clock, {
    concurrency: 16,
    perUrlConcurrency: 2,
    prefetchPerUrl: 4,
    slowStart: false,
    allowPrivateNetworks: true,
    pollIntervalMs,
    client: poster,
  });
}
const CAP = 6;

async function claimedRows() {
  const r = await db.pool.query<{ id: string; url: string; lease_token: string | null; leased_until: Date | null; leased: boolean }>(
    `SELECT id, url, lease_token, leased_until, leased_until > clock_timestamp() AS leased FROM webhook_queue WHERE lease_token IS NOT NULL`,
  );
  return r.rows;
}

function countByUrl(rows: readonly { url: string }[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const row of rows) counts.set(row.url, (counts.get(row.url) ?? 0) + 1);
  return counts;
}

describe('claims past a left-out URL’s backlog', () => {
  it.each([20_000])(
    'a URL in hand with %i due deliveries: the next claims read a bounded part of the queue, find the other URLs’ deliveries behind it and keep every cap',
    async (backlog) => {
      const rowsRead: number[] = [];
      const poster = hangingPoster();
      const busy = 'https://busy.example/hooks';
      await enqueue(busy, backlog, -100_000);
      await db.pool.query('VACUUM ANALYZE webhook_deliveries, webhook_queue');
      const d = dispatcher(countingPool(db.pool, rowsRead), poster);
      try {
        // The busy URL in hand: its cap, claimed from the earliest rows.
        expect(await d.tick()).toBe(CAP);
        // Three other URLs, every delivery due after the whole backlog.
        const others = ['https://a.example/hooks', 'https://m.example/hooks', 'https://z.example/hooks'];
        const othersIds = new Map<string, string[]>();
        for (const url of others) othersIds.set(url, await enqueue(url, 10, -50_000));
        await db.pool.query('VACUUM ANALYZE webhook_deliveries, webhook_queue');
        rowsRead.length = 0;
        // Each claim leaves out every URL in hand, and looks behind the busy URL's backlog.
        expect(await d.tick()).toBe(3 * CAP);
        expect(await d.tick()).toBe(0);
        const claimed = await claimedRows();
        const counts = countByUrl(claimed);
        // Each URL: its cap, no more; the other URLs' earliest deliveries.
        expect(counts.get(busy)).toBe(CAP);
        for (const url of others) {
          expect(counts.get(url)).toBe(CAP);
          expect(new Set(claimed.filter((row) => row.url === url).map((row) => row.id))).toEqual(new Set(othersIds.get(url)!.slice(0, CAP)));
        }
        console.log(`backlog ${backlog}: rows of the queue read per claim ${rowsRead.join(', ')}`);
        // Never the backlog: at most a few hundred rows whatever its size (decision 0094).
        expect(rowsRead.length).toBe(2);
        expect(Math.max(...rowsRead)).toBeLessThan(400);
      } finally {
        poster.release();
        await d.stop();
      }
    },
  );

  it('10,000 URLs of one due delivery each: a claim takes the earliest, one per URL, reading a bounded part of the queue', async () => {
    const rowsRead: number[] = [];
    const poster = hangingPoster();
    const ids = await enqueueManyUrls('https://shop-', 10_000, -30_000);
    await db.pool.query('VACUUM ANALYZE webhook_deliveries, webhook_queue');
    const d = dispatcher(countingPool(db.pool, rowsRead), poster);
    try {
      const taken = await d.tick();
      const claimed = await claimedRows();
      // The room of an empty dispatcher: its slots and the claims ahead (16 + 4 × 16, decision 0094).
      expect(taken).toBe(80);
      expect(new Set(claimed.map((row) => row.id))).toEqual(new Set(ids.slice(0, 80)));
      expect(countByUrl(claimed).size).toBe(80);
      // Every slot busy and the claims ahead full: the next claim has no room.
      expect(await d.tick()).toBe(0);
      expect(new Set((await claimedRows()).map((row) => row.id))).toEqual(new Set(ids.slice(0, 80)));
      console.log(`10,000 URLs: rows of the queue read per claim ${rowsRead.join(', ')}`);
      expect(Math.max(...rowsRead)).toBeLessThan(400);
    } finally {
      poster.release();
      await d.stop();
    }
  });

  it('a URL behind a busy URL’s backlog and 300 URLs with nothing due yet is reached within a few claims (each claim visits some of the URLs, from where the last stopped)', async () => {
    const rowsRead: number[] = [];
    const poster = hangingPoster();
    const d = dispatcher(countingPool(db.pool, rowsRead), poster);
    try {
      // The busy URL in hand first (a plain claim of the earliest rows: on a queue this small the
      // planner may read it whole rather than through the due-time index, so it is not counted).
      await enqueue('https://busy.example/hooks', 5_000, -100_000);
      await db.pool.query('VACUUM ANALYZE webhook_deliveries, webhook_queue');
      expect(await d.tick()).toBe(CAP);
      expect((await claimedRows()).every((row) => row.url === 'https://busy.example/hooks')).toBe(true);
      // 300 URLs whose deliveries are not due yet (retries scheduled), ordered before one that waits.
      await enqueueManyUrls('https://later-', 300, 60_000);
      const waiting = (await enqueue('https://waiting.example/hooks', 1, -50_000))[0]!;
      await db.pool.query('VACUUM ANALYZE webhook_deliveries, webhook_queue');
      rowsRead.length = 0;
      let claims = 0;
      while (!(await claimedRows()).some((row) => row.id === waiting)) {
        expect(claims).toBeLessThan(12);
        await d.tick();
        claims++;
      }
      console.log(`the waiting URL claimed at claim ${claims}; rows of the queue read per claim ${rowsRead.join(', ')}`);
      expect(Math.max(...rowsRead)).toBeLessThan(400);
      // Nothing that is not due was claimed.
      expect((await claimedRows()).filter((row) => row.url.startsWith('https://later-'))).toEqual([]);
    } finally {
      poster.release();
      await d.stop();
    }
  });
});

describe('leases of the claims', () => {
  it('a row leased by another after a claim’s snapshot, before the claim reaches it, is not taken: the due re-check under the row lock', async () => {
    // 200,000 rows leased elsewhere, due first: the claim's look at the earliest due rows
    // walks past them (tens of milliseconds) before it reaches the six rows behind them.
    const held = 'https://held-elsewhere.example/hooks';
    await enqueue(held, 200_000, -300_000);
    await db.pool.query(`UPDATE webhook_queue SET leased_until = clock_timestamp() + interval '1 hour', lease_token = gen_random_uuid() WHERE url = $1`, [
      held,
    ]);
    const targets = await enqueue('https://target.example/hooks', 6, -50_000);
    await db.pool.query('VACUUM ANALYZE webhook_deliveries, webhook_queue');
    const recheck = 'WHERE q.id = c.id AND q.next_attempt_at <= $1 AND (q.leased_until IS NULL OR q.leased_until < clock_timestamp())';
    expect(CLAIM_EARLIEST).toContain(recheck);
    /**
     * Runs `statement` as a claim and, once it is under way, leases the six rows elsewhere
     * as a claim would (only rows not leased; committed). Answers the rows both took (a
     * lease given twice), and each row's holder by its token.
     */
    const race = async (statement: string) => {
      await db.pool.query('UPDATE webhook_queue SET leased_until = NULL, lease_token = NULL WHERE id = ANY($1)', [targets]);
      const claimer = await db.pool.connect();
      try {
        const pid = (await claimer.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        // The test's own connection ready before the race starts.
        await db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [pid]);
        const started = performance.now();
        const running = claimer.query<{ id: string | null; lease_token: string | null }>(statement, [clock.now(), 16, 15, [], 6, 22, [], []]);
        // Under way (its snapshot taken: parsing and planning take a few ms), still walking past the held rows (30–40 ms).
        while ((await db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'`, [pid])).rowCount === 0);
        await new Promise((r) => setTimeout(r, 8));
        const other = await db.pool.query<{ id: string; lease_token: string }>(
          `UPDATE webhook_queue SET leased_until = clock_timestamp() + interval '15 s', lease_token = gen_random_uuid()
           WHERE id = ANY($1) AND (leased_until IS NULL OR leased_until < clock_timestamp()) RETURNING id, lease_token`,
          [targets],
        );
        const leasedAt = performance.now() - started;
        const claimed = (await running).rows.filter((row) => row.id !== null && targets.includes(row.id));
        const ranMs = performance.now() - started;
        const otherIds = new Set(other.rows.map((r) => r.id));
        const twice = claimed.filter((row) => otherIds.has(row.id!)).map((row) => row.id!);
        // Who holds each row by its token: the last writer's (the claim overwrites a lease it took twice).
        const holders = new Map<string, string>([
          ...other.rows.map((r): [string, string] => [r.id, r.lease_token]),
          ...claimed.map((r): [string, string] => [r.id!, r.lease_token!]),
        ]);
        return { claimed: claimed.length, other: other.rows.length, twice, holders, leasedAt, ranMs };
      } finally {
        claimer.release();
      }
    };
    // Up to five rounds, each the same interleaving twice: without the re-check (it must give
    // the six leases twice at least once: the race did happen with this timing) and as it is
    // (never a lease given twice; each row held by the one token that took it).
    let demonstrated = false;
    for (let round = 0; round < 5 && !demonstrated; round++) {
      const unchecked = await race(CLAIM_EARLIEST.replace(recheck, 'WHERE q.id = c.id'));
      demonstrated = unchecked.twice.length === targets.length;
      const checked = await race(CLAIM_EARLIEST);
      console.log(
        `due re-check race, round ${round + 1}: without the re-check ${unchecked.twice.length} of 6 leased twice (the other lease at ${unchecked.leasedAt.toFixed(1)} ms of ${unchecked.ranMs.toFixed(1)}); ` +
          `as it is ${checked.twice.length} (claimed ${checked.claimed}, other ${checked.other}; at ${checked.leasedAt.toFixed(1)} ms of ${checked.ranMs.toFixed(1)})`,
      );
      expect(checked.twice).toEqual([]);
      expect(checked.claimed + checked.other).toBe(targets.length);
      const rows = await db.pool.query<{ id: string; lease_token: string }>('SELECT id, lease_token FROM webhook_queue WHERE id = ANY($1)', [targets]);
      expect(new Map(rows.rows.map((r) => [r.id, r.lease_token]))).toEqual(checked.holders);
    }
    expect(demonstrated).toBe(true);
  }, 60_000);

  it('every claimed row gets a lease and a token of its own; a second dispatcher takes none of the first’s, and both keep the cap per URL', async () => {
    const first = hangingPoster();
    const second = hangingPoster();
    await enqueue('https://busy.example/hooks', 2_000, -100_000);
    await enqueue('https://other.example/hooks', 20, -50_000);
    const a = dispatcher(db.pool, first);
    const b = dispatcher(db.pool, second);
    try {
      await a.tick();
      await a.tick();
      const ofA = await claimedRows();
      await b.tick();
      await b.tick();
      const all = await claimedRows();
      const ofB = all.filter((row) => !ofA.some((x) => x.id === row.id));
      // A's claims untouched by B's (same tokens), B's all new rows.
      for (const row of ofA) expect(all.find((x) => x.id === row.id)!.lease_token).toBe(row.lease_token);
      expect(ofB.length).toBeGreaterThan(0);
      for (const rows of [ofA, ofB]) {
        expect(rows.every((row) => row.leased)).toBe(true);
        expect([...countByUrl(rows).values()].every((n) => n <= CAP)).toBe(true);
        expect(countByUrl(rows).get('https://other.example/hooks')).toBe(CAP);
      }
      expect(new Set(all.map((row) => row.lease_token)).size).toBe(all.length);
      // The attempts started are those of the claimed rows, at most 2 per URL per dispatcher.
      expect(first.posted.length).toBe(4);
      expect(second.posted.length).toBe(4);
    } finally {
      first.release();
      second.release();
      await a.stop();
      await b.stop();
    }
  });
});

describe('the queue’s pages', () => {
  it('a claim’s lease updates stay on their pages as heap-only tuples (no new index entries)', async () => {
    // One URL's cap of deliveries of 300 bytes each, as a dispatcher claims them.
    await enqueue('https://busy.example/hooks', 1_000, -100_000, 300);
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const updated = await client.query(CLAIM_EARLIEST, [clock.now(), 72, 15, [], 72, 144, [], []]);
      const hot = await client.query<{ n: string }>(`SELECT pg_stat_get_xact_tuples_hot_updated('webhook_queue'::regclass) AS n`);
      expect(updated.rowCount).toBe(72);
      // On full pages (fillfactor 100) none is; at 50 all but the last row or two of a page.
      console.log(`${hot.rows[0]!.n} of 72 lease updates heap-only`);
      expect(Number(hot.rows[0]!.n)).toBeGreaterThanOrEqual(65);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});
