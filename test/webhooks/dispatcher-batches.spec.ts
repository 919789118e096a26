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
 *
 * Dispatchers here run with `slowStart: false` (every URL has all its slots at once):
 * these tests are about claims and records; slow start has its own ("slow start per URL").
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Pool, QueryConfig } from 'pg';
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
import { emptyWebhookTables, queued } from '../support/webhook-queue';

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
  secret = registry.webhookSecretOf(project);
});
afterAll(async () => {
  await db.drop();
});
// Each test's deliveries alone in the queue (a claim takes whatever is due).
afterEach(() => emptyWebhookTables(db.pool));

/** Due deliveries to `url`, enqueued in this order (as the outbox does). */
async function enqueue(url: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = randomUUID();
    await db.pool.query(
      queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
       VALUES ($1, $2, 'invoice.paid', $3, $4, $5, true, 'pending', $6, $6)`),
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
  }>(
    `SELECT d.id, d.status, d.attempts_made, d.next_attempt_at, q.leased_until, q.lease_token
     FROM webhook_deliveries d LEFT JOIN webhook_queue q ON q.id = d.id WHERE d.id = ANY($1::uuid[])`,
    [ids],
  );
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
      slowStart: false,
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
      // The second signature covers the same timestamp too: t=<X-Service-Timestamp>,v2=<HMAC of "webhook.<t>.<body>">.
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
      slowStart: false,
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
  /** The database pool, with the deliveries each claim took, in order. */
  function countingClaims(): { pool: Pool; claims: number[] } {
    const claims: number[] = [];
    const pool = new Proxy(db.pool, {
      get(target, property) {
        if (property === 'query')
          return async (config: QueryConfig) => {
            const r = await target.query<{ id: string | null }>(config);
            if (/lease_token = gen_random_uuid\(\)/.test(config.text)) claims.push(r.rows.filter((row) => row.id !== null).length);
            return r;
          };
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    return { pool: pool as Pool, claims };
  }

  /** Answers every attempt sent until `dispatcher.stop()` has ended. */
  async function stopAnswering(dispatcher: WebhookDispatcher, poster: ReturnType<typeof heldPoster>, answered: number): Promise<void> {
    const stopped = dispatcher.stop();
    let done = false;
    void stopped.then(() => (done = true));
    while (!done) {
      for (; answered < poster.posted.length; answered++) poster.posted[answered]!.answer({ statusCode: 200, body: 'ok', durationMs: 1, error: null });
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  it('by default a URL holds 16 × its slots ahead and is refilled when half of them went out (decision 0094)', async () => {
    const url = `https://shop-${randomUUID()}.example/hooks`;
    await enqueue(url, 80);
    const poster = heldPoster();
    const { pool, claims } = countingClaims();
    // 2 slots: 2 + 32 held at most; refilled when down to 2 + 16 (decision 0094).
    const dispatcher = new WebhookDispatcher(pool, registry, clock, {
      concurrency: 32,
      perUrlConcurrency: 2,
      pollIntervalMs: 60_000,
      slowStart: false,
      allowPrivateNetworks: false,
      client: poster,
    });
    let answered = 0;
    dispatcher.start();
    await until(() => claims.length === 1, 'the first claim');
    expect(claims).toEqual([34]);
    for (; answered < 15; answered++) {
      await until(() => poster.posted.length > answered, `attempt ${answered + 1}`);
      poster.posted[answered]!.answer({ statusCode: 200, body: 'ok', durationMs: 1, error: null });
    }
    // Down to 2 + 17: no refill yet.
    await new Promise((r) => setTimeout(r, 100));
    expect(claims).toEqual([34]);
    await until(() => poster.posted.length > answered, `attempt ${answered + 1}`);
    poster.posted[answered++]!.answer({ statusCode: 200, body: 'ok', durationMs: 1, error: null });
    await until(() => claims.length === 2, 'the refill');
    expect(claims).toEqual([34, 16]);
    await stopAnswering(dispatcher, poster, answered);
  });

  it('a URL is refilled once half of what it may hold ahead went out: each refill claims that much at once', async () => {
    const url = `https://shop-${randomUUID()}.example/hooks`;
    await enqueue(url, 30);
    const poster = heldPoster();
    const { pool, claims } = countingClaims();
    // 2 slots and 8 ahead: at most 10 held; refilled when down to 2 + 8 / 2 = 6.
    const dispatcher = new WebhookDispatcher(pool, registry, clock, {
      concurrency: 32,
      perUrlConcurrency: 2,
      prefetchPerUrl: 8,
      // Claims only when woken (an attempt answered), not by the poll.
      pollIntervalMs: 60_000,
      slowStart: false,
      allowPrivateNetworks: false,
      client: poster,
    });
    let answered = 0;
    /** Answers the attempts sent so far, one at a time, until `total` have been answered. */
    const answerUpTo = async (total: number) => {
      while (answered < total) {
        await until(() => poster.posted.length > answered, `attempt ${answered + 1}`);
        poster.posted[answered++]!.answer({ statusCode: 200, body: 'ok', durationMs: 1, error: null });
      }
    };
    dispatcher.start();
    await until(() => claims.length === 1, 'the first claim');
    expect(claims).toEqual([10]);
    await answerUpTo(4);
    await until(() => claims.length === 2, 'the first refill');
    await answerUpTo(8);
    await until(() => claims.length === 3, 'the second refill');
    expect(claims).toEqual([10, 4, 4]);
    await stopAnswering(dispatcher, poster, answered);
  });

  it('waited longer than the lease allows: renewed before it is sent; its lease replaced meanwhile: not sent by this dispatcher, sent once by the next claim', async () => {
    const url = `https://shop-${randomUUID()}.example/hooks`;
    const [first, replaced, kept] = await enqueue(url, 3);
    const poster = heldPoster();
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, {
      concurrency: 8,
      // One attempt at a time to this URL, two more claimed ahead.
      perUrlConcurrency: 1,
      prefetchPerUrl: 2,
      slowStart: false,
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
      slowStart: false,
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

describe('slow start per URL (the default)', () => {
  it('a URL starts with one slot, gains one per answer up to perUrlConcurrency, and is back to one after attempts without an answer', async () => {
    const url = `https://shop-${randomUUID()}.example/hooks`;
    await enqueue(url, 40);
    const poster = heldPoster();
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 32, perUrlConcurrency: 8, allowPrivateNetworks: false, client: poster });
    const inFlight = () => poster.posted.length - answered;
    let answered = 0;
    const answerAll = (result: AttemptResult) => {
      for (const p of poster.posted.slice(answered)) p.answer(result);
      answered = poster.posted.length;
    };
    const settled = () => new Promise((r) => setTimeout(r, 150));
    dispatcher.start();
    try {
      const seen: number[] = [];
      await until(() => inFlight() === 1, 'the first attempt');
      await settled();
      seen.push(inFlight());
      // Each answer gives one more slot: 2, 4, 8 at once, and never more than 8.
      for (const expected of [2, 4, 8, 8]) {
        answerAll({ statusCode: 200, body: 'ok', durationMs: 3, error: null });
        await until(() => inFlight() === expected, `${expected} attempts at once`);
        await settled();
        seen.push(inFlight());
      }
      // None of the 8 answers: the URL is back to one slot.
      answerAll({ statusCode: null, body: null, durationMs: 10_000, error: 'no reply within 10 s' });
      await until(() => inFlight() === 1, 'one attempt after those without an answer');
      await settled();
      seen.push(inFlight());
      expect(seen).toEqual([1, 2, 4, 8, 8, 1]);
      answerAll({ statusCode: 200, body: 'ok', durationMs: 3, error: null });
      await until(() => inFlight() === 2, 'two attempts after an answer again');
    } finally {
      answerAll({ statusCode: 200, body: 'ok', durationMs: 3, error: null });
      // Attempts may still start until stop() gives the rest back: each answered as it comes.
      let stopped = false;
      const stopping = dispatcher.stop().then(() => (stopped = true));
      while (!stopped) {
        answerAll({ statusCode: 200, body: 'ok', durationMs: 3, error: null });
        await new Promise((r) => setTimeout(r, 10));
      }
      await stopping;
    }
  });
});

describe('slow start per URL, what a URL holds', () => {
  const ok: AttemptResult = { statusCode: 200, body: 'ok', durationMs: 3, error: null };
  const noAnswer: AttemptResult = { statusCode: null, body: null, durationMs: 10_000, error: 'no reply within 10 s' };
  const leasedOf = async (url: string) =>
    Number(
      (await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM webhook_queue WHERE url = $1 AND leased_until > clock_timestamp()', [url])).rows[0]!.n,
    );
  /** A poster that answers the URLs `answers` gives a result for at once, and holds the others' attempts. */
  function posterAnswering(answers: (url: string) => AttemptResult | null) {
    const held: Posted[] = [];
    const posted: string[] = [];
    const poster: WebhookPoster = {
      post: (url, body, headers) =>
        new Promise<AttemptResult>((resolve) => {
          posted.push(url);
          const result = answers(url);
          if (result) setImmediate(() => resolve(result));
          else held.push({ url, body, headers, answer: resolve });
        }),
      close: async () => undefined,
    };
    return { poster, held, posted };
  }
  async function stopAnswering(dispatcher: WebhookDispatcher, held: Posted[]) {
    let stopped = false;
    const stopping = dispatcher.stop().then(() => (stopped = true));
    while (!stopped) {
      for (const p of held.splice(0)) p.answer(ok);
      await new Promise((r) => setTimeout(r, 10));
    }
    await stopping;
  }

  /** A moment later, the URL has one attempt in flight and at most two deliveries leased (what a URL of one slot holds). */
  async function expectOneAttemptAndTwoHeld(url: string, held: readonly Posted[]) {
    await new Promise((r) => setTimeout(r, 300));
    expect(held.filter((p) => p.url === url).length).toBe(1);
    expect(await leasedOf(url)).toBeLessThanOrEqual(2);
  }

  /**
   * A started dispatcher of `concurrency` slots whose poster answers one URL at once until
   * `cool()`, and holds every other attempt (and the URL's after it); `warmUp()` has the URL
   * answer 30 (8 slots earned).
   */
  function urlThatCools(concurrency: number) {
    const url = `https://shop-${randomUUID()}.example/hooks`;
    let warm = true;
    const { poster, held, posted } = posterAnswering((u) => (warm && u === url ? ok : null));
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, { concurrency, perUrlConcurrency: 8, allowPrivateNetworks: false, client: poster });
    dispatcher.start();
    const warmUp = async () => {
      await enqueue(url, 30);
      await until(async () => posted.length === 30 && (await leasedOf(url)) === 0, 'thirty answered');
    };
    return { url, held, dispatcher, warmUp, cool: () => (warm = false) };
  }

  it('a URL that answered before and was idle for a second starts again from one slot (a receiver that worked and then hangs)', async () => {
    const { url, held, dispatcher, warmUp, cool } = urlThatCools(32);
    try {
      await warmUp();
      // At 8 slots now; idle for longer than a second.
      await new Promise((r) => setTimeout(r, 1200));
      cool();
      await enqueue(url, 30);
      await until(() => held.length === 1, 'the first attempt after the pause');
      // It holds one attempt and two deliveries in all, not 8 and 136.
      await expectOneAttemptAndTwoHeld(url, held);
    } finally {
      await stopAnswering(dispatcher, held);
    }
  });

  it('a URL that stopped answering while its deliveries waited for the dispatcher’s slots starts again from one slot', async () => {
    const { url, held, dispatcher, warmUp, cool } = urlThatCools(8);
    try {
      await warmUp();
      cool();
      // Eight other URLs take the dispatcher's 8 slots (one each), then the URL's deliveries wait claimed.
      const others = Array.from({ length: 8 }, () => `https://other-${randomUUID()}.example/hooks`);
      for (const other of others) await enqueue(other, 1);
      await until(() => held.length === 8, 'the eight other attempts');
      await enqueue(url, 20);
      await until(async () => (await leasedOf(url)) > 0, 'the URL’s deliveries claimed');
      await new Promise((r) => setTimeout(r, 1500));
      // The slots free: the URL, silent for 1.5 s with nothing in flight, gets one attempt, not 8.
      for (const p of held.splice(0)) p.answer(ok);
      await until(() => held.some((p) => p.url === url), 'the URL’s next attempt');
      // One attempt, not 8; and it holds what a URL of one slot holds: the rest of its 20 went back.
      await expectOneAttemptAndTwoHeld(url, held);
    } finally {
      await stopAnswering(dispatcher, held);
    }
  });

  it('a URL whose only attempt answers more than a second after its last answer keeps the slots it earned', async () => {
    const { url, held, dispatcher, warmUp, cool } = urlThatCools(8);
    try {
      await warmUp();
      cool();
      // Seven other URLs hold 7 of the 8 slots: the URL gets one attempt at a time.
      for (let i = 0; i < 7; i++) await enqueue(`https://other-${randomUUID()}.example/hooks`, 1);
      await until(() => held.length === 7, 'the seven other attempts');
      await enqueue(url, 40);
      await until(() => held.some((p) => p.url === url), 'the URL’s attempt');
      // It answers 1.5 s later: it was in flight all along, so not idle.
      await new Promise((r) => setTimeout(r, 1500));
      held
        .splice(
          held.findIndex((p) => p.url === url),
          1,
        )[0]!
        .answer(ok);
      await until(() => held.some((p) => p.url === url), 'the URL’s next attempt');
      for (const p of held.filter((x) => x.url !== url)) {
        held.splice(held.indexOf(p), 1);
        p.answer(ok);
      }
      await until(() => held.filter((p) => p.url === url).length === 8, 'eight attempts of the URL at once');
    } finally {
      await stopAnswering(dispatcher, held);
    }
  });

  it('a URL back to one slot gives back what it held beyond two deliveries', async () => {
    const url = `https://shop-${randomUUID()}.example/hooks`;
    await enqueue(url, 200);
    const poster = heldPoster();
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 32, perUrlConcurrency: 8, allowPrivateNetworks: false, client: poster });
    let answered = 0;
    const answerAll = (result: AttemptResult) => {
      for (const p of poster.posted.slice(answered)) p.answer(result);
      answered = poster.posted.length;
    };
    dispatcher.start();
    try {
      // Answered round by round until 8 are in flight at once, and more than 60 held ahead.
      while (poster.posted.length - answered < 8) {
        const before = poster.posted.length;
        answerAll(ok);
        await until(() => poster.posted.length > before, 'the next round');
        await new Promise((r) => setTimeout(r, 50));
      }
      await until(async () => (await leasedOf(url)) > 60, 'deliveries claimed ahead at 8 slots');
      answerAll(noAnswer);
      // Given back at once (their leases would otherwise hold them for 15 s, renewed while they wait).
      await until(async () => (await leasedOf(url)) <= 2, 'the rest given back', 3000);
      await new Promise((r) => setTimeout(r, 300));
      expect(poster.posted.length - answered).toBe(1);
      expect(await leasedOf(url)).toBeLessThanOrEqual(2);
    } finally {
      let stopped = false;
      const stopping = dispatcher.stop().then(() => (stopped = true));
      while (!stopped) {
        answerAll(ok);
        await new Promise((r) => setTimeout(r, 10));
      }
      await stopping;
    }
  });

  it('a URL due behind another URL’s backlog gets its whole allowance per claim as it answers, not two', async () => {
    const busyUrl = `https://busy-${randomUUID()}.example/hooks`;
    const other = `https://other-${randomUUID()}.example/hooks`;
    // The busy URL's 3,000 due first (bulk), then the other URL's 100.
    await db.pool.query(
      queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
       SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, $2, '{}', true, 'pending', $3, $3 FROM generate_series(1, 3000)`),
      [projectId, busyUrl, clock.now()],
    );
    now += 1;
    await enqueue(other, 100);
    const posted: string[] = [];
    const poster: WebhookPoster = {
      post: (url) =>
        new Promise<AttemptResult>((resolve) => {
          posted.push(url);
          setTimeout(() => resolve(ok), url === busyUrl ? 20 : 0);
        }),
      close: async () => undefined,
    };
    // Claims that look behind the backlog (the only ones that reach the other URL's rows): the most of its rows one brought.
    let mostAtOnce = 0;
    const counting = new Proxy(db.pool, {
      get(target, property) {
        if (property === 'query')
          return async (query: string | QueryConfig, values?: unknown[]) => {
            const result = await target.query(query as QueryConfig, values);
            if ((typeof query === 'string' ? query : query.text).includes('WITH RECURSIVE'))
              mostAtOnce = Math.max(mostAtOnce, (result.rows as { url?: string }[]).filter((row) => row.url === other).length);
            return result;
          };
        const value = Reflect.get(target, property) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as Pool;
    const dispatcher = new WebhookDispatcher(counting, registry, clock, { concurrency: 32, perUrlConcurrency: 8, allowPrivateNetworks: false, client: poster });
    dispatcher.start();
    try {
      await until(() => posted.filter((u) => u === other).length === 100, 'the other URL’s 100', 30_000);
      // 2, 4, 6 … while it ramps, then the rest at once (up to 136), not two per claim.
      expect(mostAtOnce).toBeGreaterThanOrEqual(50);
    } finally {
      await dispatcher.stop();
    }
  });

  it('a burst of 2,000 to one URL that answers at once goes out in claims of many, not two per claim whenever it runs dry', async () => {
    const url = `https://burst-${randomUUID()}.example/hooks`;
    await db.pool.query(
      queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
       SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, $2, '{}', true, 'pending', $3, $3 FROM generate_series(1, 2000)`),
      [projectId, url, clock.now()],
    );
    const { poster, held, posted } = posterAnswering(() => ok);
    let claims = 0;
    const counting = new Proxy(db.pool, {
      get(target, property) {
        if (property === 'query')
          return (query: string | QueryConfig, values?: unknown[]) => {
            if ((typeof query === 'string' ? query : query.text).includes('FOR UPDATE SKIP LOCKED')) claims++;
            return target.query(query as QueryConfig, values);
          };
        const value = Reflect.get(target, property) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as Pool;
    const dispatcher = new WebhookDispatcher(counting, registry, clock, { concurrency: 32, perUrlConcurrency: 8, allowPrivateNetworks: false, client: poster });
    dispatcher.start();
    try {
      await until(() => posted.length === 2000, 'the 2,000', 60_000);
      // About 2,000 / 64 refills and the ramp, plus a few empty polls: two per claim would be about a thousand.
      expect(claims).toBeLessThan(150);
    } finally {
      await stopAnswering(dispatcher, held);
    }
  });

  it('24 URLs that never answer: a URL enqueued after their deliveries is delivered while they hang', async () => {
    const hung = Array.from({ length: 24 }, () => `https://hung-${randomUUID()}.example/hooks`);
    for (const url of hung) await enqueue(url, 30);
    const healthy = `https://healthy-${randomUUID()}.example/hooks`;
    const { poster, held, posted } = posterAnswering((url) => (url === healthy ? ok : null));
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 32, perUrlConcurrency: 8, allowPrivateNetworks: false, client: poster });
    dispatcher.start();
    try {
      await until(() => new Set(held.map((p) => p.url)).size === 24, 'every hung URL’s first attempt');
      await enqueue(healthy, 100);
      await until(() => posted.filter((u) => u === healthy).length === 100, 'the healthy URL’s 100');
      // Each hung URL had one attempt in flight all along.
      expect(held.length).toBe(24);
    } finally {
      await stopAnswering(dispatcher, held);
    }
  });
});

describe('a batch recorded in one statement', () => {
  it('a lease taken over by another claim meanwhile: the outcome moves nothing, the other claim keeps its lease, the rest of the batch is recorded', async () => {
    const ids = await enqueue('https://shop.example/hooks', 3);
    const poster = heldPoster();
    const outcomes: WebhookAttemptOutcome[] = [];
    const errors: Error[] = [];
    const dispatcher = new WebhookDispatcher(db.pool, registry, clock, {
      concurrency: 8,
      perUrlConcurrency: 8,
      slowStart: false,
      allowPrivateNetworks: false,
      client: poster,
      onAttempt: (o) => outcomes.push(o),
    });
    dispatcher.onError = (e) => errors.push(e);
    expect(await dispatcher.tick()).toBe(3);
    await until(() => poster.posted.length === 3, 'three attempts');
    // Between the claim and the record, the lease is replaced in the table as another
    // dispatcher's claim would replace it (a new token, a new lease).
    const lost = ids[1]!;
    const other = await db.pool.query<{ lease_token: string; leased_until: Date }>(
      `UPDATE webhook_queue SET lease_token = gen_random_uuid(), leased_until = clock_timestamp() + interval '15 seconds'
       WHERE id = $1 RETURNING lease_token, leased_until`,
      [lost],
    );
    for (const p of poster.posted) p.answer({ statusCode: 200, body: 'ok', durationMs: 4, error: null });
    await dispatcher.drain();

    expect(errors).toEqual([]);
    const rows = await rowsOf(ids);
    expect(new Set(rows.flatMap((r) => r.attempts.map((a) => a.xmin))).size).toBe(1);
    const lostRow = rows.find((r) => r.id === lost)!;
    // Still the other claim's: pending, nothing counted, its token and lease untouched.
    expect(lostRow).toMatchObject({ status: 'pending', attempts_made: 0, lease_token: other.rows[0]!.lease_token });
    expect(lostRow.leased_until!.getTime()).toBe(other.rows[0]!.leased_until.getTime());
    expect(lostRow.attempts.map((a) => [a.attempt, a.status_code, a.superseded])).toEqual([[1, 200, true]]);
    for (const row of rows.filter((r) => r.id !== lost)) {
      expect(row).toMatchObject({ status: 'delivered', attempts_made: 1, lease_token: null, leased_until: null, next_attempt_at: null });
      expect(row.attempts.map((a) => [a.attempt, a.status_code, a.superseded])).toEqual([[1, 200, false]]);
    }
    expect(outcomes.sort()).toEqual(['delivered', 'delivered', 'superseded']);
  });

  it('two dispatchers’ batches of the same deliveries (resent in between) recorded at the same moment: attempts numbered one after the other, both batches recorded', async () => {
    const url = `https://shop-${randomUUID()}.example/hooks`;
    const ids = await enqueue(url, 6);
    const errors: Error[] = [];
    const make = (poster: WebhookPoster, outcomes: WebhookAttemptOutcome[]) => {
      const d = new WebhookDispatcher(db.pool, registry, clock, {
        concurrency: 8,
        perUrlConcurrency: 8,
        slowStart: false,
        allowPrivateNetworks: false,
        client: poster,
        onAttempt: (o) => outcomes.push(o),
      });
      d.onError = (e) => errors.push(e);
      return d;
    };
    // Three rounds: each round, A's attempts are overtaken by the operator's resend and
    // B's claim, and both batches come back together.
    for (let round = 1; round <= 3; round++) {
      const pa = heldPoster();
      const pb = heldPoster();
      const aOutcomes: WebhookAttemptOutcome[] = [];
      const bOutcomes: WebhookAttemptOutcome[] = [];
      const a = make(pa, aOutcomes);
      const b = make(pb, bOutcomes);
      expect(await a.tick()).toBe(6);
      await until(() => pa.posted.length === 6, 'A’s attempts');
      for (const id of ids) await resendDelivery(db.pool, id, clock.now());
      expect(await b.tick()).toBe(6);
      await until(() => pb.posted.length === 6, 'B’s attempts');
      // The test holds every row's lock while both batches are written: both statements
      // start (their snapshots taken) and wait; then both go on at once.
      const holder = await db.pool.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM webhook_deliveries WHERE id = ANY($1::uuid[]) FOR UPDATE', [ids]);
        // A's batch in the order sent, B's in the reverse order.
        for (const p of pa.posted) p.answer({ statusCode: 500, body: 'поздно', durationMs: 3, error: null });
        for (const p of [...pb.posted].reverse()) p.answer({ statusCode: 200, body: 'ok', durationMs: 2, error: null });
        await until(
          async () =>
            Number(
              (
                await db.pool.query<{ n: string }>(
                  `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH attempt AS MATERIALIZED%'`,
                )
              ).rows[0]!.n,
            ) === 2,
          'both batches waiting for the rows',
        );
        await holder.query('COMMIT');
      } finally {
        holder.release();
      }
      await Promise.all([a.drain(), b.drain()]);
      await Promise.all([a.stop(), b.stop()]);
      expect(errors).toEqual([]);
      expect(aOutcomes).toEqual(Array(6).fill('superseded'));
      expect(bOutcomes).toEqual(Array(6).fill('delivered'));
      const rows = await rowsOf(ids);
      for (const row of rows) {
        // Every attempt so far, numbered 1, 2, … without a gap or a repeat; this round's two are the last two.
        expect(row.attempts.map((x) => x.attempt)).toEqual(Array.from({ length: 2 * round }, (_, i) => i + 1));
        const thisRound = row.attempts.slice(-2);
        expect(thisRound.map((x) => [x.status_code, x.superseded]).sort()).toEqual([
          [200, false],
          [500, true],
        ]);
        // B's attempt decided (the first since the resend), A's moved nothing.
        expect(row).toMatchObject({ status: 'delivered', attempts_made: round, lease_token: null, leased_until: null });
      }
      // The next round starts from delivered rows made due again.
      for (const id of ids) await resendDelivery(db.pool, id, clock.now());
    }
  });
});

describe('attempts gathered into larger record batches', () => {
  /** The pool, counting the record statements sent (each is one batch, one transaction). */
  function countingRecords(records: number[]): Pool {
    return new Proxy(db.pool, {
      get(target, property) {
        if (property === 'query')
          return (config: string | QueryConfig, values?: unknown[]) => {
            const text = typeof config === 'string' ? config : config.text;
            if (text.includes('INSERT INTO webhook_attempts')) records.push(((typeof config === 'string' ? values : config.values)![0] as string[]).length);
            return typeof config === 'string' ? target.query(config, values) : target.query(config);
          };
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  it('attempts that come back one after another within the gathering time are recorded in one statement, one transaction', async () => {
    const ids = await enqueue('https://shop.example/hooks', 4);
    const poster = heldPoster();
    const records: number[] = [];
    const dispatcher = new WebhookDispatcher(countingRecords(records), registry, clock, {
      concurrency: 8,
      perUrlConcurrency: 8,
      slowStart: false,
      allowPrivateNetworks: false,
      client: poster,
      // Far longer than the test takes to answer the four, one event-loop turn and more apart.
      recordGatherMs: 5000,
    });
    expect(await dispatcher.tick()).toBe(4);
    await until(() => poster.posted.length === 4, 'four attempts');
    for (const p of poster.posted) {
      p.answer({ statusCode: 200, body: 'ok', durationMs: 2, error: null });
      await new Promise((r) => setTimeout(r, 20));
    }
    await dispatcher.drain();
    expect(records).toEqual([4]);
    const rows = await rowsOf(ids);
    expect(new Set(rows.flatMap((r) => r.attempts.map((a) => a.xmin))).size).toBe(1);
    expect(rows.map((r) => [r.status, r.attempts.length])).toEqual(ids.map(() => ['delivered', 1]));
  });

  it('a full batch (recordBatch) is recorded without waiting for the gathering time, and stop() records what waits at once', async () => {
    const ids = await enqueue('https://shop.example/hooks', 3);
    const poster = heldPoster();
    const records: number[] = [];
    const dispatcher = new WebhookDispatcher(countingRecords(records), registry, clock, {
      concurrency: 8,
      perUrlConcurrency: 8,
      slowStart: false,
      allowPrivateNetworks: false,
      client: poster,
      recordBatch: 2,
      // An hour: only a full batch or stop() records anything within this test.
      recordGatherMs: 3_600_000,
    });
    expect(await dispatcher.tick()).toBe(3);
    await until(() => poster.posted.length === 3, 'three attempts');
    const [a, b, c] = poster.posted;
    a!.answer({ statusCode: 200, body: 'ok', durationMs: 2, error: null });
    b!.answer({ statusCode: 500, body: 'нет', durationMs: 2, error: null });
    await until(async () => (await rowsOf(ids)).filter((r) => r.attempts.length === 1).length === 2, 'the full batch recorded');
    c!.answer({ statusCode: 200, body: 'ok', durationMs: 2, error: null });
    await dispatcher.stop();
    expect(records).toEqual([2, 1]);
    const rows = await rowsOf(ids);
    expect(rows.map((r) => r.attempts.length)).toEqual([1, 1, 1]);
  });
});
