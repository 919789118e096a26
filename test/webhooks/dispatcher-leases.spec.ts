/**
 * Two webhook dispatchers on one queue (real PostgreSQL, a real local receiver): an
 * attempt whose lease ran out and that comes back after another dispatcher
 * delivered must not turn the delivered row back to pending, and its result is still
 * kept in the history. Before lease tokens the outcome update was unconditional: the
 * late failure made the row pending again with a retry scheduled, and its history
 * row was dropped (its attempt number was taken).
 */
import { fixedKeys, SecretBox } from '#platform/secrets';
import { randomBytes, randomUUID } from 'node:crypto';
import { SystemClock } from '#platform/clock';
import { Registry } from '#payments/merchants';
import { WebhookDispatcher, WebhookAttemptOutcome } from '#payments/webhooks';
import { startWebhookReceiver, WebhookReceiver } from '../support/webhook-receiver';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { webhookProject } from '../support/webhook-project';
import { queued } from '../support/webhook-queue';

let db: TestDatabase;
let registry: Registry;
let receiver: WebhookReceiver;
let projectId: string;
const clock = new SystemClock();

beforeAll(async () => {
  db = await createTestDatabase();
  registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
  receiver = await startWebhookReceiver();
  const project = await webhookProject(registry, clock.now(), receiver.url);
  projectId = project.id;
});
afterAll(async () => {
  await receiver.close();
  await db.drop();
});

/**
 * A due test-mode delivery to the receiver, as the outbox enqueues it: due at the
 * clock's now. (Not PostgreSQL's now(): it has microseconds, the clock milliseconds, so
 * a claim made within the same millisecond found the row not yet due.)
 */
async function enqueue(): Promise<string> {
  const id = randomUUID();
  await db.pool.query(
    queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
     VALUES ($1, $2, 'invoice.paid', $3, $4, $5, true, 'pending', $6, $6)`),
    [id, randomUUID(), projectId, receiver.url, JSON.stringify({ id, type: 'invoice.paid' }), clock.now()],
  );
  return id;
}

async function delivery(id: string) {
  const row = await db.pool.query<{ status: string; attempts_made: number; next_attempt_at: Date | null; leased_until: Date | null }>(
    'SELECT d.status, d.attempts_made, d.next_attempt_at, q.leased_until FROM webhook_deliveries d LEFT JOIN webhook_queue q ON q.id = d.id WHERE d.id = $1',
    [id],
  );
  const attempts = await db.pool.query<{ attempt: number; status_code: number | null; superseded: boolean }>(
    'SELECT attempt, status_code, superseded FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt',
    [id],
  );
  return { ...row.rows[0]!, attempts: attempts.rows };
}

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what}: not in time`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const dispatcher = (outcomes: WebhookAttemptOutcome[], options: { leaseSeconds?: number } = {}) =>
  new WebhookDispatcher(db.pool, registry, clock, {
    concurrency: 4,
    allowPrivateNetworks: true,
    // The first dispatcher waits for its held reply far longer than its lease.
    timeoutMs: 60_000,
    onAttempt: (outcome) => outcomes.push(outcome),
    ...options,
  });

describe('webhook leases: a late attempt cannot overwrite a newer outcome', () => {
  it('dispatcher A’s lease runs out, B delivers, then A’s late 500 comes back: still delivered, both attempts in the history', async () => {
    const id = await enqueue();
    let answerFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (answerFirst = resolve));
    const start = receiver.received.length;
    receiver.answer = (_w, index) => (index === start ? { status: 500, body: 'поздно', after: firstHeld } : { status: 200, body: 'ok' });

    const aOutcomes: WebhookAttemptOutcome[] = [];
    const bOutcomes: WebhookAttemptOutcome[] = [];
    const a = dispatcher(aOutcomes, { leaseSeconds: 1 });
    const b = dispatcher(bOutcomes);

    expect(await a.tick()).toBe(1);
    await receiver.waitFor((all) => all.length === start + 1, 'A’s attempt');
    // A's reply is held; its one-second lease runs out (database time).
    await until(
      async () => (await db.pool.query('SELECT 1 FROM webhook_queue WHERE id = $1 AND leased_until < clock_timestamp()', [id])).rowCount === 1,
      'A’s lease to run out',
    );
    expect(await b.tick()).toBe(1);
    await b.drain();
    expect(bOutcomes).toEqual(['delivered']);
    expect((await delivery(id)).status).toBe('delivered');

    answerFirst();
    await a.drain();
    expect(aOutcomes).toEqual(['superseded']);

    const after = await delivery(id);
    expect(after.status).toBe('delivered');
    expect(after.next_attempt_at).toBeNull();
    expect(after.leased_until).toBeNull();
    expect(after.attempts_made).toBe(1);
    // Numbered in the order recorded: B's delivery first, A's late failure after it.
    expect(after.attempts).toEqual([
      { attempt: 1, status_code: 200, superseded: false },
      { attempt: 2, status_code: 500, superseded: true },
    ]);
    // Nothing is due: neither dispatcher sends it again.
    expect(await a.tick()).toBe(0);
    expect(await b.tick()).toBe(0);
    expect(receiver.received).toHaveLength(start + 2);
  });

  it('an attempt whose lease ran out but was not taken over still decides (nothing newer happened)', async () => {
    const id = await enqueue();
    let answerFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (answerFirst = resolve));
    const start = receiver.received.length;
    receiver.answer = (_w, index) => (index === start ? { status: 200, body: 'ok', after: firstHeld } : { status: 200, body: 'ok' });
    const outcomes: WebhookAttemptOutcome[] = [];
    const a = dispatcher(outcomes, { leaseSeconds: 1 });
    expect(await a.tick()).toBe(1);
    await receiver.waitFor((all) => all.length === start + 1, 'the attempt');
    await until(
      async () => (await db.pool.query('SELECT 1 FROM webhook_queue WHERE id = $1 AND leased_until < clock_timestamp()', [id])).rowCount === 1,
      'the lease to run out',
    );
    answerFirst();
    await a.drain();
    expect(outcomes).toEqual(['delivered']);
    const after = await delivery(id);
    expect(after.status).toBe('delivered');
    expect(after.attempts).toEqual([{ attempt: 1, status_code: 200, superseded: false }]);
  });

  it('many late and current attempts of one delivery recorded at once get distinct attempt numbers', async () => {
    const id = await enqueue();
    const start = receiver.received.length;
    const holds: (() => void)[] = [];
    receiver.answer = () => ({ status: 503, after: new Promise<void>((resolve) => holds.push(resolve)) });
    const dispatchers = Array.from({ length: 4 }, () => dispatcher([], { leaseSeconds: 1 }));
    // Each dispatcher claims the row in turn after the previous lease ran out: four attempts in flight.
    for (const [i, d] of dispatchers.entries()) {
      expect(await d.tick()).toBe(1);
      await receiver.waitFor((all) => all.length === start + i + 1, `attempt ${i + 1}`);
      if (i < dispatchers.length - 1) {
        await until(
          async () => (await db.pool.query('SELECT 1 FROM webhook_queue WHERE id = $1 AND leased_until < clock_timestamp()', [id])).rowCount === 1,
          'the lease to run out',
        );
      }
    }
    for (const release of holds) release();
    await Promise.all(dispatchers.map((d) => d.drain()));
    const after = await delivery(id);
    expect(after.attempts.map((a) => a.attempt)).toEqual([1, 2, 3, 4]);
    // Only the last claim's attempt decided: one failure counted, a retry scheduled.
    expect(after.attempts.filter((a) => !a.superseded)).toHaveLength(1);
    expect(after.attempts_made).toBe(1);
    expect(after.status).toBe('pending');
    expect(after.next_attempt_at).not.toBeNull();
  });
});
