/**
 * The sandbox a first start makes on an empty database (Registry.createSandboxIfEmpty):
 * its account and project are written together or not at all. The account was written
 * in a transaction of its own: a start that failed before the project left an account
 * alone, and every later start found the database "not empty" and made no sandbox, its
 * keys never printed (review 78).
 */
import { randomBytes } from 'node:crypto';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { Registry } from '#payments/merchants';
import { CHECKPOINT_LOCK } from '#event-store/postgres';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

it('a first start that fails writing the project leaves nothing, and the next start makes the sandbox', async () => {
  const registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
  const now = new Date();
  // The project's insert fails, as a lost connection or a full disk would make it.
  await db.pool.query(`CREATE FUNCTION refuse_project() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$`);
  await db.pool.query('CREATE TRIGGER refuse_project BEFORE INSERT ON projects FOR EACH ROW EXECUTE FUNCTION refuse_project()');
  await expect(registry.createSandboxIfEmpty(now)).rejects.toThrow('disk full');
  expect((await db.pool.query('SELECT count(*)::int AS n FROM accounts')).rows).toEqual([{ n: 0 }]);

  await db.pool.query('DROP TRIGGER refuse_project ON projects');
  const sandbox = await registry.createSandboxIfEmpty(now);
  expect(sandbox?.keys.test.secretKey).toMatch(/^sk_test_/);
  expect((await db.pool.query('SELECT a.name, p.name AS project FROM accounts a JOIN projects p ON p.account_id = a.id')).rows).toEqual([
    { name: 'Sandbox', project: 'Sandbox project' },
  ]);
  // Made once: a later start finds the database not empty.
  expect(await registry.createSandboxIfEmpty(now)).toBeNull();
});

// Its lock was the log checkpoints' (the same key): an API starting while a checkpoint was extended waited for it.
it('is made while a log checkpoint is being extended (the two locks are apart)', async () => {
  const other = await createTestDatabase();
  const holder = await other.pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1)', [CHECKPOINT_LOCK]);
    const registry = new Registry(other.pool, new SecretBox(fixedKeys([randomBytes(32)])));
    const made = registry.createSandboxIfEmpty(new Date()).then((sandbox) => sandbox !== null);
    const blocked = new Promise<string>((resolve) => setTimeout(() => resolve('waited for the checkpoint lock'), 10_000));
    expect(await Promise.race([made, blocked])).toBe(true);
  } finally {
    await holder.query('ROLLBACK');
    holder.release();
    await other.drop();
  }
});
