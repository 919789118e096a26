import { randomBytes } from 'node:crypto';
import { preparedStatement } from '#platform/database';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { Registry } from '#payments/merchants';
import { createTestDatabase, TestDatabase } from '../support/test-database';

describe('prepared statements', () => {
  it('one text has one name, and different texts different names', () => {
    const a = preparedStatement('SELECT $1::int', [1]);
    expect(preparedStatement('SELECT $1::int', [2])).toEqual({ name: a.name, text: 'SELECT $1::int', values: [2] });
    expect(preparedStatement('SELECT $1::bigint', [1]).name).not.toBe(a.name);
    expect(a.name).toMatch(/^s_[0-9a-f]{20}$/);
  });

  describe('the key lookup on a connection that prepared it', () => {
    let db: TestDatabase;
    beforeAll(async () => {
      // One connection: every lookup reuses the statements the first one prepared.
      db = await createTestDatabase({ poolSize: 1 });
    });
    afterAll(async () => {
      await db.drop();
    });

    it('keeps working when a migration adds a column to projects while the process runs', async () => {
      const registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
      const now = new Date('2026-11-22T10:00:00Z');
      const account = await registry.createAccount('Prepared Ltd', 'prepared@example.com', now);
      const { project, keys } = await registry.createProject(
        account.id,
        {
          name: 'shop',
          status: 'active',
          webhookUrl: null,
          webhookEvents: [],
          usdtEnabled: false,
          holdHours: 24,
          methodOverrides: {},
          customerFeeShare: 0,
        },
        now,
      );
      const bySecret = () => registry.identifyBySecretKeyCountingRequest(keys.test.secretKey, now);
      const first = await bySecret();
      expect({ project: first?.identity.project.id, mode: first?.identity.mode, hits: first?.hits }).toEqual({ project: project.id, mode: 'test', hits: 1 });
      expect((await registry.identifyByPublicKey(keys.live.publicKey))?.project.id).toBe(project.id);

      await db.pool.query('ALTER TABLE projects ADD COLUMN note_for_a_later_release text');

      const second = await bySecret();
      expect({ project: second?.identity.project.id, hits: second?.hits }).toEqual({ project: project.id, hits: 2 });
      expect((await registry.identifyByPublicKey(keys.live.publicKey))?.project.id).toBe(project.id);
      // A key of the other mode's prefix, or an unknown key, is not identified and counts nothing.
      expect(await registry.identifyBySecretKeyCountingRequest(keys.live.secretKey.replace('sk_live_', 'sk_test_'), now)).toBeNull();
      expect((await bySecret())?.hits).toBe(3);
    });
  });
});
