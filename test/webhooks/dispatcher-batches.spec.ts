/**
 * The dispatcher records attempts in batches and claims ahead of its slots (real
 * PostgreSQL). Recording: the attempts that come back together are recorded in one
 * transaction, each exactly as it happened (status, reply body, duration, error, the
 * moment of the attempt, the next attempt counted from its end), and an attempt whose
 * lease was replaced in the meantime moves nothing. Claims ahead: a delivery that
 * waited in the dispatcher longer than its lease allows is sent only after its lease
 * was renewed, and one whose lease was replaced meanwhile is not sent by it at all.
 * The HTTP side here is a poster the test answers (the real client is tested in
 * keep-alive-delivery.spec.ts and webhooks.spec.ts).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { ManualClock } from '#platform/clock';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { Registry } from '#payments/merchants';
import {
  AttemptResult,
  resendDelivery,
  WebhookAttemptOutcome,
  WebhookDispatcher,
  WebhookPoster,
  webhookSignature,
  webhookTimestampedSignature,
} from '#payments/webhooks';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { webhookProject } from '../support/webhook-project';

let db: TestDatabase;
let registry: Registry;
let projectId: string;
let secret: string;
/** The gateway clock of these tests: the test sets it. */
let now = Date.now() - 60_000;
const clock = new ManualClock(() => now);

beforeAll(async () => {
  db = await createTestDatabase();
  registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
  const project = await webhookProject(registry, clock.now());
  projectId = project.id;
  secret = project.webhookSecret;
});
afterAll(async () => {
  await db.drop();
});
// Each test's deliveries alone in the queue (a claim takes whatever is due).
afterEach(async () => {
  await db.pool.query('DELETE FROM webhook_attempts');
  await db.pool.query('DELETE FROM webhook_deliveries');
});

/** Due deliveries to `url`, enqueued in this order (as the outbox does). */
async function enqueue(url: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = randomUUID();
    await db.pool.query(
      `INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
       VALUES ($1, $2, 'invoice.paid', $3, $4, $5, true, 'pending', $6, $6)`,
      [id, randomUUID(), projectId, url, JSON.stringify({ id, type: 'invoice.paid', n: i }), clock.now()],
    );
    ids.push(id);
  }
  return ids;
}

interface Posted {
  readonly url: string;
  readonly body: string;
  readonly headers: Record<string, string>;
  answer(result: AttemptResult): void;
}

/** A poster whose every attempt waits for the test's answer. */
function heldPoster(): WebhookPoster & { readonly posted: Posted[] } {
  const posted: Posted[] = [];
  return {
    posted,
    post: (url, body, headers) => new Promise<AttemptResult>((resolve) => posted.push({ url, body, headers, answer: resolve })),
    close: async () => undefined,
  };
}

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what}: not in time`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function rowsOf(ids: readonly string[]) {
  const deliveries = await db.pool.query<{
    id: string;
    status: string;
    attempts_made: number;
    next_attempt_at: Date | null;
    leased_until: Date | null;
    lease_token: string | null;
  }>('SELECT id, status, attempts_made, next_attempt_at, leased_until, lease_token FROM webhook_deliveries WHERE id = ANY($1::uuid[])', [ids]);
  const attempts = await db.pool.query<{
    delivery_id: string;
    attempt: number;
    at: Date;
    status_code: number | null;
    body: string | null;
    duration_ms: number;
    error: string | null;
    superseded: boolean;
    xmin: string;
  }>(
    'SELECT delivery_id, attempt, at, status_code, body, duration_ms, error, superseded, xmin::text FROM webhook_attempts WHERE delivery_id = ANY($1::uuid[]) ORDER BY attempt',
    [ids],
  );
  return ids.map((id) => ({ ...deliveries.rows.find((d) => d.id === id)!, attempts: attempts.rows.filter((a) => a.delivery_id === id) }));
}

describe('attempts recorded in batches', () => {
  it('the attempts that come back together are recorded in one transaction, each exactly as it happened', async () => {
    const ids = await enqueue('https://shop.example/hooks', 5);
    const poster = heldPoster();
    const outcomes: WebhookAttemptOutcome[] = [];
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, {
      concurrency: 8,
      perUrlConcurrency: 8,
      allowPrivateNetworks: false,
      client: poster,
      onAttempt: (o) => outcomes.push(o),
    });
    const attemptAt = now;
    expect(await dispatcher.tick()).toBe(5);
    await until(() => poster.posted.length === 5, 'five attempts');
    // Signed as before: the HMAC of the exact body, the attempt's moment as the timestamp.
    for (const p of poster.posted) {
      expect(p.headers['x-service-signature']).toBe(webhookSignature(p.body, secret));
      expect(p.headers['x-service-timestamp']).toBe(String(Math.floor(attemptAt / 1000)));
      // The second signature covers the same timestamp too: t=<X-Service-Timestamp>,v1=<HMAC of "<t>.<body>">.
      expect(p.headers['x-service-signature-timestamped']).toBe(webhookTimestampedSignature(p.body, secret, Math.floor(attemptAt / 1000)));
      expect(ids).toContain(p.headers['x-service-delivery-id']);
    }
    // The replies come back 3 s later on the clock, all at once.
    now += 3000;
    const endedAt = now;
    const results: AttemptResult[] = [
      { statusCode: 200, body: 'ok', durationMs: 12, error: null },
      { statusCode: 500, body: 'x'.repeat(4096), durationMs: 34, error: null },
      { statusCode: null, body: null, durationMs: 10_000, error: 'no reply within 10 s' },
      { statusCode: 302, body: 'moved\u0000', durationMs: 7, error: null },
      { statusCode: 204, body: '', durationMs: 1, error: null },
    ];
    const byDelivery = new Map(poster.posted.map((p, i) => [p.headers['x-service-delivery-id']!, results[i]!]));
    poster.posted.forEach((p, i) => p.answer(results[i]!));
    await dispatcher.drain();

    const rows = await rowsOf(ids);
    // One transaction recorded them all.
    expect(new Set(rows.flatMap((r) => r.attempts.map((a) => a.xmin))).size).toBe(1);
    for (const row of rows) {
      const result = byDelivery.get(row.id)!;
      expect(row.attempts).toHaveLength(1);
      expect(row.attempts[0]).toMatchObject({
        attempt: 1,
        status_code: result.statusCode,
        // A NUL cannot be stored in PostgreSQL text: it is dropped.
        body: result.body?.replace('\u0000', '') ?? null,
        duration_ms: result.durationMs,
        error: result.error,
        superseded: false,
      });
      expect(row.attempts[0]!.at.getTime()).toBe(attemptAt);
      expect(row.attempts_made).toBe(1);
      expect(row.leased_until).toBeNull();
      expect(row.lease_token).toBeNull();
      const acknowledged = result.statusCode !== null && result.statusCode >= 200 && result.statusCode < 300;
      expect(row.status).toBe(acknowledged ? 'delivered' : 'pending');
      // The first retry 60 s after the attempt ended.
      expect(row.next_attempt_at?.getTime() ?? null).toBe(acknowledged ? null : endedAt + 60_000);
    }
    expect(outcomes.sort()).toEqual(['delivered', 'delivered', 'retry', 'retry', 'retry']);
  });

  it('an attempt whose lease was replaced meanwhile moves nothing, and the others of its batch are recorded', async () => {
    const ids = await enqueue('https://shop.example/hooks', 3);
    const poster = heldPoster();
    const outcomes: WebhookAttemptOutcome[] = [];
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, {
      concurrency: 8,
      perUrlConcurrency: 8,
      allowPrivateNetworks: false,
      client: poster,
      onAttempt: (o) => outcomes.push(o),
    });
    expect(await dispatcher.tick()).toBe(3);
    await until(() => poster.posted.length === 3, 'three attempts');
    // The operator resends the second one while its attempt is out: its lease token is dropped.
    const lost = ids[1]!;
    now += 1000;
    const resent = await resendDelivery(db.pool, lost, clock.now());
    expect(resent).not.toBeNull();
    const before = (await rowsOf([lost]))[0]!;
    for (const p of poster.posted) p.answer({ statusCode: 500, body: 'сломалось', durationMs: 5, error: null });
    await dispatcher.drain();

    const rows = await rowsOf(ids);
    expect(new Set(rows.flatMap((r) => r.attempts.map((a) => a.xmin))).size).toBe(1);
    const lostRow = rows.find((r) => r.id === lost)!;
    // Nothing of the resent delivery moved: still due now, no attempt counted, no lease.
    expect({
      status: lostRow.status,
      attempts_made: lostRow.attempts_made,
      next_attempt_at: lostRow.next_attempt_at,
      lease_token: lostRow.lease_token,
    }).toEqual({
      status: before.status,
      attempts_made: before.attempts_made,
      next_attempt_at: before.next_attempt_at,
      lease_token: null,
    });
    expect(lostRow.next_attempt_at!.getTime()).toBe(resent!.nextAttemptAt.getTime());
    // Its attempt is in the history, marked superseded.
    expect(lostRow.attempts.map((a) => [a.attempt, a.status_code, a.superseded])).toEqual([[1, 500, true]]);
    for (const row of rows.filter((r) => r.id !== lost)) {
      expect(row.status).toBe('pending');
      expect(row.attempts_made).toBe(1);
      expect(row.attempts.map((a) => [a.attempt, a.status_code, a.superseded])).toEqual([[1, 500, false]]);
    }
    expect(outcomes.sort()).toEqual(['retry', 'retry', 'superseded']);
  });
});

describe('deliveries claimed ahead of their slots', () => {
  it('waited longer than the lease allows: renewed before it is sent; its lease replaced meanwhile: not sent by this dispatcher, sent once by the next claim', async () => {
    const url = `https://shop-${randomUUID()}.example/hooks`;
    const [first, replaced, kept] = await enqueue(url, 3);
    const poster = heldPoster();
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, {
      concurrency: 8,
      // One attempt at a time to this URL, two more claimed ahead.
      perUrlConcurrency: 1,
      prefetchPerUrl: 2,
      allowPrivateNetworks: false,
      // A lease shorter than an attempt: whatever waited must be renewed first.
      leaseSeconds: 1,
      timeoutMs: 5000,
      client: poster,
    });
    expect(await dispatcher.tick()).toBe(3);
    await until(() => poster.posted.length === 1, 'the first attempt');
    expect(poster.posted[0]!.headers['x-service-delivery-id']).toBe(first);
    const claimed = await rowsOf([replaced!, kept!]);
    for (const row of claimed) expect(row.lease_token).not.toBeNull();
    // While they wait, the operator resends one of the two (its token is dropped).
    await resendDelivery(db.pool, replaced!, clock.now());

    poster.posted[0]!.answer({ statusCode: 200, body: 'ok', durationMs: 3, error: null });
    await until(() => poster.posted.length === 2, 'the kept delivery, after its renewal');
    expect(poster.posted[1]!.headers['x-service-delivery-id']).toBe(kept);
    const renewed = (await rowsOf([kept!]))[0]!;
    expect(renewed.lease_token).toBe(claimed.find((r) => r.id === kept)!.lease_token);
    expect(renewed.leased_until!.getTime()).toBeGreaterThan(claimed.find((r) => r.id === kept)!.leased_until!.getTime());
    poster.posted[1]!.answer({ statusCode: 200, body: 'ok', durationMs: 3, error: null });
    await dispatcher.drain();
    // The replaced one was dropped unsent: no attempt, no history.
    expect(poster.posted).toHaveLength(2);
    expect((await rowsOf([replaced!]))[0]!.attempts).toEqual([]);

    // The next claim sends it, once.
    expect(await dispatcher.tick()).toBe(1);
    await until(() => poster.posted.length === 3, 'the replaced delivery, claimed again');
    expect(poster.posted[2]!.headers['x-service-delivery-id']).toBe(replaced);
    poster.posted[2]!.answer({ statusCode: 200, body: 'ok', durationMs: 3, error: null });
    await dispatcher.drain();
    const rows = await rowsOf([first!, replaced!, kept!]);
    for (const row of rows) {
      expect(row.status).toBe('delivered');
      expect(row.attempts.map((a) => [a.attempt, a.status_code, a.superseded])).toEqual([[1, 200, false]]);
    }
  });

  it('stop() gives the deliveries claimed ahead back at once (their leases dropped) and records the attempts in flight', async () => {
    const url = `https://shop-${randomUUID()}.example/hooks`;
    const [first, second, third] = await enqueue(url, 3);
    const poster = heldPoster();
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, {
      concurrency: 8,
      perUrlConcurrency: 1,
      prefetchPerUrl: 4,
      allowPrivateNetworks: false,
      client: poster,
    });
    dispatcher.start();
    await until(() => poster.posted.length === 1, 'the first attempt');
    const stopped = dispatcher.stop();
    // The two waiting ones are released while the first is still out.
    await until(async () => (await rowsOf([second!, third!])).every((r) => r.lease_token === null && r.leased_until === null), 'the release');
    poster.posted[0]!.answer({ statusCode: 200, body: 'ok', durationMs: 3, error: null });
    await stopped;
    const rows = await rowsOf([first!, second!, third!]);
    expect(rows.map((r) => [r.status, r.attempts.length])).toEqual([
      ['delivered', 1],
      ['pending', 0],
      ['pending', 0],
    ]);
    expect(poster.posted).toHaveLength(1);
  });
});
