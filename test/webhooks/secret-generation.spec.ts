/**
 * The webhook dispatcher follows secret rotations by a counter (webhook_secret_changes,
 * raised by a trigger): deliveries claimed ahead that read the secret before a change are
 * renewed, reading it again. A counter that goes back (a database restored or failed over
 * while the dispatcher runs) or that is missing must not stop deliveries nor the
 * dispatcher's stop: each delivery is renewed at most until it matches what was last read.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { SystemClock } from '#platform/clock';
import { Registry } from '#payments/merchants';
import { WebhookDispatcher } from '#payments/webhooks';
import { startWebhookReceiver, validSignature, WebhookReceiver } from '../support/webhook-receiver';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { webhookProject } from '../support/webhook-project';
import { queued } from '../support/webhook-queue';

jest.setTimeout(60_000);

let db: TestDatabase;
let registry: Registry;
let receiver: WebhookReceiver;
const clock = new SystemClock();

beforeAll(async () => {
  db = await createTestDatabase();
  registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
  receiver = await startWebhookReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await db?.drop();
});

/** `n` due deliveries of a new project to the receiver; answers the project's id and webhook secret. */
async function backlog(n: number): Promise<{ projectId: string; secret: string; ids: string[] }> {
  const project = await webhookProject(registry, clock.now(), receiver.url);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = randomUUID();
    await db.pool.query(
      queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
       VALUES ($1, $2, 'invoice.paid', $3, $4, $5, true, 'pending', $6, $6)`),
      [id, randomUUID(), project.id, receiver.url, JSON.stringify({ id, type: 'invoice.paid' }), clock.now()],
    );
    ids.push(id);
  }
  return { projectId: project.id, secret: registry.webhookSecretOf(project), ids };
}

const deliveredOf = (ids: string[]) => receiver.received.filter((w) => ids.includes(w.body?.id as string));

it.each([
  ['goes back (a restored database)', 'UPDATE webhook_secret_changes SET generation = 0'],
  ['is missing', 'DELETE FROM webhook_secret_changes'],
])('a rotation counter that %s: every delivery claimed ahead still goes out once, and the dispatcher stops', async (_what, change) => {
  // One slot: the backlog waits claimed ahead, a delivery at a time.
  receiver.answer = () => ({ status: 200, body: 'ok', delayMs: 100 });
  const { secret, ids } = await backlog(12);
  await db.pool.query('UPDATE webhook_secret_changes SET generation = generation + 5');
  const dispatcher = new WebhookDispatcher(db.pool, registry, clock, { concurrency: 1, allowPrivateNetworks: true, pollIntervalMs: 50 });
  dispatcher.start();
  try {
    await receiver.waitFor(() => deliveredOf(ids).length >= 2, 'the first deliveries');
    await db.pool.query(change);
    await receiver.waitFor(() => deliveredOf(ids).length >= ids.length, 'every delivery', 20_000);
  } finally {
    await dispatcher.stop();
    await db.pool.query('INSERT INTO webhook_secret_changes (only_row, generation) VALUES (true, 100) ON CONFLICT (only_row) DO UPDATE SET generation = 100');
  }
  expect(new Set(deliveredOf(ids).map((w) => w.body.id)).size).toBe(ids.length);
  expect(deliveredOf(ids)).toHaveLength(ids.length);
  expect(deliveredOf(ids).every((w) => validSignature(w, secret))).toBe(true);
});
