/**
 * Concurrent rotations of one project's webhook secret (which also signs its HMAC
 * requests): the last committed is in force, and the process that ran them must not
 * remember another. A rotation whose answer reaches the process after a later one's
 * (committed first, answered last) used to be remembered: that process then refused
 * the secret in force (401, counted as a failure of the merchant's address) until it
 * noticed the change, or for good if it already had.
 */
import { randomBytes } from 'node:crypto';
import { Pool, PoolClient } from 'pg';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { Registry, RotateWebhookSecret, RotateWebhookSecretHandler } from '#payments/merchants';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { webhookProject } from '../support/webhook-project';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

it('a rotation answered after a later one committed leaves the process remembering no secret but the one in force', async () => {
  // The registry's own pool, whose first rotation is held after its UPDATE committed, until the second has answered.
  const pool = new Pool({ connectionString: db.url, max: 4 });
  let releaseFirst!: () => void;
  const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
  let held = false;
  const connect = pool.connect.bind(pool) as (callback?: unknown) => Promise<PoolClient>;
  // pool.query connects with a callback: left as it is (the rotation's write connects without one).
  (pool as unknown as { connect: (callback?: unknown) => Promise<PoolClient> }).connect = async (callback?: unknown) => {
    if (callback !== undefined) return connect(callback);
    const client = await connect();
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = async (...args: unknown[]) => {
      const result = await query(...args);
      const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text;
      if (!held && /UPDATE projects SET webhook_secret/.test(String(text))) {
        held = true;
        await firstHeld;
      }
      return result;
    };
    return client;
  };
  const keys = new SecretBox(fixedKeys([randomBytes(32)]));
  const registry = new Registry(pool, keys);
  const rotation = new RotateWebhookSecretHandler(registry, pool);
  try {
    const project = await webhookProject(registry, new Date());
    const { rows } = await db.pool.query<{ public_key: string }>('SELECT public_key FROM api_keys WHERE project_id = $1 AND revoked_at IS NULL', [project.id]);
    await registry.warmUpCredentials();

    const first = rotation.execute(new RotateWebhookSecret(project.id, new Date()));
    for (const until = Date.now() + 10_000; !held; await new Promise((resolve) => setTimeout(resolve, 10))) {
      if (Date.now() > until) throw new Error('the first rotation never reached its UPDATE');
    }
    const second = await rotation.execute(new RotateWebhookSecret(project.id, new Date()));
    releaseFirst();
    const loser = await first;
    const inForce = (await db.pool.query<{ webhook_secret: string }>('SELECT webhook_secret FROM projects WHERE id = $1', [project.id])).rows[0]!;
    expect(registry.webhookSecretOf({ id: project.id, sealedWebhookSecret: inForce.webhook_secret })).toBe(second);
    expect(loser).not.toBe(second);
    for (const { public_key } of rows) expect([undefined, second]).toContain(registry.knownPublicIds.seenLive(public_key));
  } finally {
    releaseFirst();
    await pool.end();
  }
});
