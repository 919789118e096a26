/**
 * The pending deliveries apart from the history (decision 0094; real
 * PostgreSQL). An outcome takes the delivery off the queue (delivered, failed)
 * or reschedules it there, and updates its record in `webhook_deliveries` as a
 * heap-only tuple (no index entry). The resend puts a finished delivery back in the
 * queue, or makes its queue row due now with its lease dropped. A queue row exists
 * exactly while its record is pending (no foreign key: the writers keep them together). The attempts' history
 * has no foreign key: the retention sweep, running while attempts
 * are recorded, leaves no attempt without its delivery.
 *
 * Dispatchers here run with `slowStart: false` (every URL has all its slots at once):
 * these tests are about claims and records; slow start has its own in dispatcher-batches.spec.ts.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { ManualClock } from '#platform/clock';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { Registry } from '#payments/merchants';
import {
  AttemptResult,
  resendDelivery,
  resendFailedDeliveries,
  sweepWebhookHistory,
  WebhookAttemptOutcome,
  WebhookDispatcher,
  WebhookPoster,
} from '#payments/webhooks';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { webhookProject } from '../support/webhook-project';
import { rehearsingPool } from '../support/rehearsing-pool';
import { emptyWebhookTables, queued } from '../support/webhook-queue';
import { seededRandom } from '../support/test-seed';

let db: TestDatabase;
let registry: Registry;
let projectId: string;
const now = Date.now() - 60_000;
const clock = new ManualClock(() => now);
const DAY_MS = 86_400_000;

beforeAll(async () => {
  db = await createTestDatabase();
  registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
  projectId = (await webhookProject(registry, clock.now())).id;
});
afterAll(async () => {
  await db.drop();
});
afterEach(() => emptyWebhookTables(db.pool));

/** A poster that answers every attempt at once with `statusCode`. */
const answering = (statusCode: number): WebhookPoster & { readonly posted: string[] } => {
  const posted: string[] = [];
  return {
    posted,
    post: async (_url, body) => {
      posted.push(body);
      return { statusCode, body: 'ok', durationMs: 1, error: null } satisfies AttemptResult;
    },
    close: async () => undefined,
  };
};

async function enqueue(count: number, bodyBytes = 300): Promise<string[]> {
  const r = await db.pool.query<{ id: string }>(
    queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
     SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, 'https://shop.example/hooks', rpad('{}', $4, ' '), true, 'pending', $2, $2
     FROM generate_series(1, $3)`),
    [projectId, clock.now(), count, bodyBytes],
  );
  return r.rows.map((row) => row.id);
}

const isRecord = (text: string) => text.includes('INSERT INTO webhook_attempts');

/**
 * The pool with every record statement run once more before the real one, in a
 * transaction rolled back, to count what it did to the two tables (pushed to `writes`).
 */
function recordCountingPool(pool: Pool, writes: { updated: number; hot: number; dequeued: number }[]): Pool {
  return rehearsingPool(pool, isRecord, async (client, run) => {
    await run();
    const r = await client.query<{ updated: string; hot: string; dequeued: string }>(
      `SELECT pg_stat_get_xact_tuples_updated('webhook_deliveries'::regclass) AS updated,
              pg_stat_get_xact_tuples_hot_updated('webhook_deliveries'::regclass) AS hot,
              pg_stat_get_xact_tuples_deleted('webhook_queue'::regclass) AS dequeued`,
    );
    const row = r.rows[0]!;
    writes.push({ updated: Number(row.updated), hot: Number(row.hot), dequeued: Number(row.dequeued) });
  });
}

/** Queue rows whose record is missing or not pending, and pending records with no queue row: both 0 while every writer keeps them together. */
async function queueApartFromPendingRecords(pool: Pool): Promise<{ queuedNotPending: number; pendingNotQueued: number }> {
  const r = await pool.query<{ queued_not_pending: number; pending_not_queued: number }>(
    `SELECT (SELECT count(*)::int FROM webhook_queue q WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = q.id AND d.status = 'pending')) AS queued_not_pending,
            (SELECT count(*)::int FROM webhook_deliveries d WHERE d.status = 'pending' AND NOT EXISTS (SELECT 1 FROM webhook_queue q WHERE q.id = d.id)) AS pending_not_queued`,
  );
  return { queuedNotPending: r.rows[0]!.queued_not_pending, pendingNotQueued: r.rows[0]!.pending_not_queued };
}

const queueRows = async (ids: readonly string[]) =>
  (
    await db.pool.query<{ id: string; next_attempt_at: Date; attempts_made: number; schedule_base: number; lease_token: string | null }>(
      'SELECT id, next_attempt_at, attempts_made, schedule_base, lease_token FROM webhook_queue WHERE id = ANY($1::uuid[])',
      [ids],
    )
  ).rows;

describe('outcomes', () => {
  it('a delivered attempt takes its delivery off the queue and updates its record as a heap-only tuple', async () => {
    const ids = await enqueue(20);
    const writes: { updated: number; hot: number; dequeued: number }[] = [];
    const outcomes: WebhookAttemptOutcome[] = [];
    const poster = answering(200);
    const d = new WebhookDispatcher(recordCountingPool(db.pool, writes), registry, clock, {
      concurrency: 32,
      perUrlConcurrency: 32,
      slowStart: false,
      allowPrivateNetworks: true,
      client: poster,
      onAttempt: (o) => outcomes.push(o),
    });
    await d.tick();
    await d.drain();
    await d.stop();
    expect(outcomes).toEqual(ids.map(() => 'delivered'));
    const updated = writes.reduce((n, w) => n + w.updated, 0);
    console.log(`record statements: ${JSON.stringify(writes)}`);
    expect(updated).toBe(20);
    expect(writes.reduce((n, w) => n + w.hot, 0)).toBe(20);
    expect(writes.reduce((n, w) => n + w.dequeued, 0)).toBe(20);
    expect(await queueRows(ids)).toEqual([]);
    expect(await queueApartFromPendingRecords(db.pool)).toEqual({ queuedNotPending: 0, pendingNotQueued: 0 });
    const records = await db.pool.query<{ status: string; attempts_made: number; next_attempt_at: Date | null }>(
      'SELECT status, attempts_made, next_attempt_at FROM webhook_deliveries WHERE id = ANY($1::uuid[])',
      [ids],
    );
    expect(records.rows).toEqual(ids.map(() => ({ status: 'delivered', attempts_made: 1, next_attempt_at: null })));
  });

  it('a failed attempt keeps the delivery queued, rescheduled, its lease dropped and its attempts counted there and in the record', async () => {
    const [id] = await enqueue(1);
    const d = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 4, slowStart: false, allowPrivateNetworks: true, client: answering(500) });
    await d.tick();
    await d.drain();
    await d.stop();
    expect(await queueRows([id!])).toEqual([{ id, next_attempt_at: new Date(now + 60_000), attempts_made: 1, schedule_base: 0, lease_token: null }]);
    const record = await db.pool.query('SELECT status, attempts_made, next_attempt_at FROM webhook_deliveries WHERE id = $1', [id]);
    expect(record.rows[0]).toEqual({ status: 'pending', attempts_made: 1, next_attempt_at: new Date(now + 60_000) });
  });
});

describe('the resend', () => {
  it('puts a delivered delivery back in the queue, due now, with a fresh schedule from its attempts made', async () => {
    const [id] = await enqueue(1);
    const d = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 4, slowStart: false, allowPrivateNetworks: true, client: answering(200) });
    await d.tick();
    await d.drain();
    expect(await queueRows([id!])).toEqual([]);
    expect(await resendDelivery(db.pool, id!, clock.now())).toEqual({ id, nextAttemptAt: clock.now() });
    expect(await queueRows([id!])).toEqual([{ id, next_attempt_at: clock.now(), attempts_made: 1, schedule_base: 1, lease_token: null }]);
    expect((await db.pool.query('SELECT status FROM webhook_deliveries WHERE id = $1', [id])).rows[0]).toEqual({ status: 'pending' });
    // Sent again and delivered again: off the queue, two attempts in its history.
    expect(await d.tick()).toBe(1);
    await d.drain();
    await d.stop();
    expect(await queueRows([id!])).toEqual([]);
    const attempts = await db.pool.query('SELECT attempt, superseded FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt', [id]);
    expect(attempts.rows).toEqual([
      { attempt: 1, superseded: false },
      { attempt: 2, superseded: false },
    ]);
  });

  // A resend went to the URL stored when the webhook was queued: after the merchant moved, up to 30 days of signed
  // customer data to a host they left (whose domain may have changed hands).
  it("goes to the project's URL now, not the one the delivery was first made for: one resent and the failed ones", async () => {
    const [one, failed] = await enqueue(2);
    await db.pool.query(`UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL WHERE id = $1`, [failed]);
    await db.pool.query('DELETE FROM webhook_queue WHERE id = $1', [failed]);
    await db.pool.query(`UPDATE projects SET webhook_url = 'https://moved.example/hooks' WHERE id = $1`, [projectId]);
    try {
      expect(await resendDelivery(db.pool, one!, clock.now())).toEqual({ id: one, nextAttemptAt: clock.now() });
      expect(await resendFailedDeliveries(db.pool, projectId, clock.now())).toBe(1);
      const urls = await db.pool.query(
        `SELECT d.url AS delivery, q.url AS queued FROM webhook_deliveries d JOIN webhook_queue q ON q.id = d.id WHERE d.id = ANY($1::uuid[])`,
        [[one, failed]],
      );
      expect(urls.rows).toEqual([
        { delivery: 'https://moved.example/hooks', queued: 'https://moved.example/hooks' },
        { delivery: 'https://moved.example/hooks', queued: 'https://moved.example/hooks' },
      ]);
      const posted: string[] = [];
      const poster: WebhookPoster = {
        post: async (url) => (posted.push(url), { statusCode: 200, body: 'ok', durationMs: 1, error: null }),
        close: async () => undefined,
      };
      const d = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 4, slowStart: false, allowPrivateNetworks: true, client: poster });
      await d.tick();
      await d.drain();
      await d.stop();
      expect(posted).toEqual(['https://moved.example/hooks', 'https://moved.example/hooks']);
    } finally {
      await db.pool.query(`UPDATE projects SET webhook_url = 'https://shop.example/hooks' WHERE id = $1`, [projectId]);
    }
  });

  it('is refused (409 conflict) when the project has no URL now: not sent to the one the merchant left', async () => {
    const [one] = await enqueue(1);
    await db.pool.query('UPDATE projects SET webhook_url = NULL WHERE id = $1', [projectId]);
    try {
      await expect(resendDelivery(db.pool, one!, clock.now())).rejects.toMatchObject({ code: 'conflict', message: expect.stringContaining('нет адреса') });
      await expect(resendFailedDeliveries(db.pool, projectId, clock.now())).rejects.toMatchObject({ code: 'conflict' });
    } finally {
      await db.pool.query(`UPDATE projects SET webhook_url = 'https://shop.example/hooks' WHERE id = $1`, [projectId]);
    }
  });

  it('makes a leased pending delivery due now, its token dropped; an unknown delivery is null', async () => {
    const [id] = await enqueue(1);
    await db.pool.query(
      `UPDATE webhook_queue SET lease_token = gen_random_uuid(), leased_until = clock_timestamp() + interval '15 seconds', next_attempt_at = $2, attempts_made = 3, schedule_base = 0
       WHERE id = $1`,
      [id, new Date(now + 3_600_000)],
    );
    await db.pool.query('UPDATE webhook_deliveries SET attempts_made = 3 WHERE id = $1', [id]);
    expect(await resendDelivery(db.pool, id!, clock.now())).toEqual({ id, nextAttemptAt: clock.now() });
    expect(await queueRows([id!])).toEqual([{ id, next_attempt_at: clock.now(), attempts_made: 3, schedule_base: 3, lease_token: null }]);
    expect(await resendDelivery(db.pool, randomUUID(), clock.now())).toBeNull();
  });
});

describe('retention without the history’s foreign key', () => {
  /** Finished deliveries enqueued and attempted `ageDays` ago (one attempt each). */
  async function oldFinished(count: number, ageDays: number): Promise<string[]> {
    const at = new Date(now - ageDays * DAY_MS);
    const r = await db.pool.query<{ id: string }>(
      `WITH d AS (
         INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, attempts_made, attempts_recorded, next_attempt_at, created_at)
         SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, 'https://shop.example/hooks', '{}', true, 'failed', 1, 1, NULL, $2
         FROM generate_series(1, $3) RETURNING id),
       a AS (INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, body, duration_ms, error) SELECT id, 1, $2, 500, 'x', 3, NULL FROM d)
       SELECT id FROM d`,
      [projectId, at, count],
    );
    return r.rows.map((row) => row.id);
  }
  const orphans = async () =>
    Number(
      (
        await db.pool.query<{ n: string }>(
          'SELECT count(*) AS n FROM webhook_attempts a WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = a.delivery_id)',
        )
      ).rows[0]!.n,
    );

  it('a delivery whose attempt is being recorded (its record locked) is not swept, and once it is recorded it is kept', async () => {
    const [id] = await oldFinished(1, 40);
    const recorder = await db.pool.connect();
    try {
      await recorder.query('BEGIN');
      await recorder.query('SELECT 1 FROM webhook_deliveries WHERE id = $1 FOR NO KEY UPDATE', [id]);
      await recorder.query(
        `INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, body, duration_ms, error, superseded) VALUES ($1, 2, $2, 200, 'ok', 1, NULL, true)`,
        [id, clock.now()],
      );
      expect(await sweepWebhookHistory(db.pool, clock.now(), 30)).toBe(0);
      await recorder.query('COMMIT');
    } finally {
      recorder.release();
    }
    expect(await sweepWebhookHistory(db.pool, clock.now(), 30)).toBe(0);
    expect((await db.pool.query('SELECT 1 FROM webhook_deliveries WHERE id = $1', [id])).rowCount).toBe(1);
    expect(await orphans()).toBe(0);
  });

  it('sweeps running while resent old deliveries are attempted and recorded leave no attempt without its delivery', async () => {
    const rng = seededRandom('retention while attempts are recorded');
    const ids = await oldFinished(300, 40);
    const resent = ids.filter(() => rng.int(0, 1) === 1);
    const poster = answering(200);
    const d = new WebhookDispatcher(db.pool, registry, clock, {
      concurrency: 16,
      perUrlConcurrency: 16,
      slowStart: false,
      allowPrivateNetworks: true,
      pollIntervalMs: 1,
      client: poster,
    });
    d.start();
    const kept = new Set<string>();
    let swept = 0;
    try {
      const resending = (async () => {
        for (const id of resent) {
          if (await resendDelivery(db.pool, id, clock.now())) kept.add(id);
          if (rng.int(0, 3) === 0) await new Promise((r) => setImmediate(r));
        }
      })();
      const sweeping = (async () => {
        for (let round = 0; round < 200; round++) {
          swept += await sweepWebhookHistory(db.pool, clock.now(), 30, rng.int(1, 8));
          await new Promise((r) => setImmediate(r));
        }
      })();
      await Promise.all([resending, sweeping]);
      // What was resent in time is delivered (attempted now: not swept); the rest goes.
      const deadline = Date.now() + 30_000;
      while (Number((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM webhook_queue')).rows[0]!.n) > 0) {
        if (Date.now() > deadline) throw new Error('the resent deliveries were not delivered in time');
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await d.stop();
    }
    while ((await sweepWebhookHistory(db.pool, clock.now(), 30)) > 0) swept++;
    console.log(`${resent.length} resent, ${kept.size} before their sweep; ${swept} swept; ${poster.posted.length} attempts sent`);
    expect(await orphans()).toBe(0);
    const left = await db.pool.query<{ id: string; status: string; attempts: number }>(
      `SELECT d.id, d.status, (SELECT count(*)::int FROM webhook_attempts a WHERE a.delivery_id = d.id) AS attempts FROM webhook_deliveries d`,
    );
    expect(new Set(left.rows.map((r) => r.id))).toEqual(kept);
    for (const row of left.rows) expect(row).toMatchObject({ status: 'delivered', attempts: 2 });
    expect(await queueApartFromPendingRecords(db.pool)).toEqual({ queuedNotPending: 0, pendingNotQueued: 0 });
  });
});
