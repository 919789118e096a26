/**
 * The webhook dispatcher's "database reached again" (onRound, the outage log's info
 * line) follows a round in which a query was answered, not any round that did not
 * throw (review40): a dispatcher with no room to claim asks nothing in most rounds, and
 * its renewals and give-backs swallow their errors, so while the database was still
 * away it said "reached again" between two "not reached" (a warn/info pair each time).
 *
 * Real PostgreSQL behind a pool whose queries the test makes fail as a lost server's
 * do (ECONNREFUSED); one slot held by a receiver that does not answer yet and four
 * deliveries claimed behind it, so the rounds have no room to claim and only the look
 * at the secrets' generation (every 200 ms while deliveries wait) asks the database.
 */
import { fixedKeys, SecretBox } from '#platform/secrets';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { SystemClock } from '#platform/clock';
import { Registry } from '#payments/merchants';
import { WebhookDispatcher } from '#payments/webhooks';
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
  projectId = (await webhookProject(registry, clock.now(), receiver.url)).id;
});
afterAll(async () => {
  await receiver.close();
  await db.drop();
});

async function until(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what}: not in time`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

it('says the database is reached only after a round whose query was answered', async () => {
  for (let i = 0; i < 5; i++) {
    const id = randomUUID();
    await db.pool.query(
      queued(`INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
       VALUES ($1, $2, 'invoice.paid', $3, $4, $5, true, 'pending', $6, $6)`),
      [id, randomUUID(), projectId, receiver.url, JSON.stringify({ id, type: 'invoice.paid' }), clock.now()],
    );
  }
  let answer!: () => void;
  const held = new Promise<void>((resolve) => (answer = resolve));
  receiver.answer = () => ({ status: 200, body: 'ok', after: held });

  let away = false;
  const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', syscall: 'connect' });
  const pool = { query: (...args: unknown[]) => (away ? Promise.reject(refused()) : (db.pool.query as (...a: unknown[]) => unknown)(...args)) };
  const dispatcher = new WebhookDispatcher(pool as unknown as Pool, registry, clock, {
    concurrency: 1,
    perUrlConcurrency: 1,
    prefetchPerUrl: 8,
    allowPrivateNetworks: true,
    timeoutMs: 60_000,
  });
  const said: string[] = [];
  dispatcher.onRound = () => said.push('reached');
  dispatcher.onError = () => said.push('failed');
  dispatcher.start();
  try {
    // One attempt in flight (held), four claimed behind it: no room to claim.
    await receiver.waitFor((all) => all.length === 1, 'the first attempt');
    away = true;
    const from = said.length;
    await until(() => said.slice(from).filter((s) => s === 'failed').length >= 3, 'three failed rounds');
    const during = said.slice(from);
    console.log(`while away: ${during.join(' ')}`);
    expect(during.slice(during.indexOf('failed'))).not.toContain('reached');

    away = false;
    const back = said.length;
    await until(() => said.slice(back).includes('reached'), 'a round answered again');
  } finally {
    away = false;
    answer();
    await dispatcher.stop();
  }
});
