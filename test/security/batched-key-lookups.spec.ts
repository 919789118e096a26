/**
 * The Bearer lookups of one event-loop turn share one statement
 * (Registry.identifyBySecretKeyCountingRequest, secret-key-lookups.ts). Each lookup
 * must get what it would have got alone in arrival order: its key (or nothing for an
 * unknown, revoked or wrong-mode key), its own count in the key's rate window (two
 * requests of one key count 2), and its poll verdict. The counts stay exact when two
 * processes (two registries on two pools) send overlapping batches at once. Real
 * PostgreSQL throughout.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { Pool } from 'pg';
import { AccessControl, Refusal } from '#payments/access';
import { Registry, RotateProjectKeys, RotateProjectKeysHandler } from '#payments/merchants';
import { createPool } from '#platform/database';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { fastCheckSeed } from '../support/test-seed';

let db: TestDatabase;
let secrets: SecretBox;
let registry: Registry;
const start = new Date('2026-11-23T12:00:00.250Z');
const at = (ms: number) => new Date(start.getTime() + ms);
const SETTINGS = {
  name: 'shop',
  status: 'active' as const,
  webhookUrl: null,
  webhookEvents: [],
  usdtEnabled: false,
  holdHours: 24,
  methodOverrides: {},
  customerFeeShare: 0,
};

beforeAll(async () => {
  db = await createTestDatabase();
  secrets = new SecretBox(fixedKeys([randomBytes(32)]));
  registry = new Registry(db.pool, secrets);
});
afterAll(async () => {
  await db.drop();
});

async function newProject() {
  const account = await registry.createAccount('Batch Ltd', `batch-${randomUUID()}@example.com`, start);
  return registry.createProject(account.id, SETTINGS, start);
}

/** Counts the statements a pool is sent (the database is real; only the calls are counted). */
function countStatements(pool: Pool): { readonly count: () => number; readonly stop: () => void } {
  const original = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  let n = 0;
  (pool as unknown as { query: unknown }).query = (...args: unknown[]) => {
    n++;
    return original(...args);
  };
  return { count: () => n, stop: () => ((pool as unknown as { query: unknown }).query = original) };
}

const windowRow = async (keyId: string, second: number) =>
  (await db.pool.query<{ hits: number }>('SELECT hits FROM rate_limit_windows WHERE key_id = $1 AND window_second = $2', [keyId, second])).rows[0]?.hits ?? 0;

describe('Bearer lookups of one event-loop turn', () => {
  it('share one statement; each request of one key gets its own count in arrival order, and the row counts them all', async () => {
    const { project, keys } = await newProject();
    const now = at(1_000);
    const statements = countStatements(db.pool);
    let found;
    try {
      found = await Promise.all(Array.from({ length: 10 }, () => registry.identifyBySecretKeyCountingRequest(keys.test.secretKey, now)));
    } finally {
      statements.stop();
    }
    expect(statements.count()).toBe(1);
    expect(found.map((f) => f?.hits)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(new Set(found.map((f) => f?.identity.project.id))).toEqual(new Set([project.id]));
    expect(found.every((f) => f?.identity.mode === 'test' && f.poll === null)).toBe(true);
    expect(await windowRow(found[0]!.identity.keyId, Math.floor(now.getTime() / 1000))).toBe(10);
    // The next turn continues the count.
    expect((await registry.identifyBySecretKeyCountingRequest(keys.test.secretKey, now))?.hits).toBe(11);
  });

  // The project's id in capitals (as a path may spell it) opened no webhook secret: the new keys were not remembered.
  it('a rotation remembers the new keys with the webhook secret, however the project id is spelled', async () => {
    const { project } = await newProject();
    const rotated = await new RotateProjectKeysHandler(registry, db.pool).execute(new RotateProjectKeys(project.id.toUpperCase(), 'test', start));
    expect(registry.knownPublicIds.seenLive(rotated.publicKey)).toBe(registry.webhookSecretOf(project));
  });

  it('answers each lookup of a mixed batch for itself: two projects, both modes, an unknown, a revoked and a wrong-mode key count nothing', async () => {
    const first = await newProject();
    const second = await newProject();
    const revokedSecret = first.keys.live.secretKey;
    const rotated = await new RotateProjectKeysHandler(registry, db.pool).execute(new RotateProjectKeys(first.project.id, 'live', start));
    const now = at(2_000);
    const secretsOfTheBatch = [
      first.keys.test.secretKey,
      second.keys.test.secretKey,
      `sk_test_${'x'.repeat(32)}`, // unknown
      revokedSecret, // revoked by the rotation
      rotated.secretKey,
      second.keys.live.secretKey.replace('sk_live_', 'sk_test_'), // a live key under the test prefix
      first.keys.test.secretKey,
      'not a key',
      second.keys.live.secretKey,
    ];
    const found = await Promise.all(secretsOfTheBatch.map((s) => registry.identifyBySecretKeyCountingRequest(s, now)));
    expect(found.map((f) => (f ? { project: f.identity.project.id, mode: f.identity.mode, hits: f.hits } : null))).toEqual([
      { project: first.project.id, mode: 'test', hits: 1 },
      { project: second.project.id, mode: 'test', hits: 1 },
      null,
      null,
      { project: first.project.id, mode: 'live', hits: 1 },
      null,
      { project: first.project.id, mode: 'test', hits: 2 },
      null,
      { project: second.project.id, mode: 'live', hits: 1 },
    ]);
    // The project is read whole (its webhook secret as stored, opened where used), as for a lookup alone.
    expect(registry.webhookSecretOf(found[0]!.identity.project)).toMatch(/^whsec_/);
    // Nothing was counted for the revoked key.
    const revokedKey = await db.pool.query<{ id: string }>('SELECT id FROM api_keys WHERE project_id = $1 AND revoked_at IS NOT NULL', [first.project.id]);
    expect(await windowRow(revokedKey.rows[0]!.id, Math.floor(now.getTime() / 1000))).toBe(0);
  });

  it('with a limit of 5: of 8 requests of one key in one turn exactly the first 5 are admitted; a read over the rate takes no poll mark', async () => {
    const access = new AccessControl(db.pool, { perSecond: 5, pollIntervalSeconds: 3 });
    const { keys } = await newProject();
    const now = at(3_000);
    const found = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        registry.identifyBySecretKeyCountingRequest(keys.test.secretKey, now, i === 6 ? access.pollMarkOf('invoice:late', now) : null),
      ),
    );
    const verdicts = await Promise.all(found.map((f) => access.admitCounted(f!.hits, now)));
    expect(verdicts.map((v) => v === null)).toEqual([true, true, true, true, true, false, false, false]);
    // The 7th request (over the rate) did not take invoice:late's mark: the next second's read does.
    expect(found[6]!.poll).toEqual({ taken: false, lastAt: null });
    const next = at(4_000);
    const later = await registry.identifyBySecretKeyCountingRequest(keys.test.secretKey, next, access.pollMarkOf('invoice:late', next));
    expect(later?.hits).toBe(1);
    expect(later?.poll?.taken).toBe(true);
  });

  it('two reads of one resource in one turn: the first takes the mark, the second waits the interval; another resource is not affected', async () => {
    const access = new AccessControl(db.pool, { perSecond: 60, pollIntervalSeconds: 3 });
    const { keys } = await newProject();
    const now = at(5_000);
    const reads = ['invoice:a', 'invoice:b', 'invoice:a'];
    const found = await Promise.all(reads.map((r) => registry.identifyBySecretKeyCountingRequest(keys.test.secretKey, now, access.pollMarkOf(r, now))));
    expect(found.map((f) => access.pollVerdict(f!.poll!, now))).toEqual([null, null, { code: 'rate_limited', retryAfterSeconds: 3 }]);
    const marks = await db.pool.query<{ resource: string; last_at: Date }>('SELECT resource, last_at FROM poll_marks WHERE key_id = $1 ORDER BY resource', [
      found[0]!.identity.keyId,
    ]);
    expect(marks.rows).toEqual([
      { resource: 'invoice:a', last_at: now },
      { resource: 'invoice:b', last_at: now },
    ]);
  });

  it('random turns give the same counts and poll verdicts batched as the same lookups one at a time (seed printed)', async () => {
    const seed = fastCheckSeed('batched-key-lookups');
    const access = new AccessControl(db.pool, { perSecond: 4, pollIntervalSeconds: 3 });
    const resources = [null, 'invoice:a', 'invoice:b'] as const;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            advanceMs: fc.integer({ min: 0, max: 1_600 }),
            lookups: fc.array(fc.record({ key: fc.integer({ min: 0, max: 2 }), resource: fc.constantFrom(...resources) }), { minLength: 1, maxLength: 8 }),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        async (turns) => {
          // Two sets of three keys: one looked up batched, the other one at a time.
          const batchedKeys = await Promise.all([0, 1, 2].map(async () => (await newProject()).keys.test.secretKey));
          const aloneKeys = await Promise.all([0, 1, 2].map(async () => (await newProject()).keys.test.secretKey));
          let ms = 0;
          for (const turn of turns) {
            ms += turn.advanceMs;
            const now = at(100_000 + ms);
            const verdict = (f: Awaited<ReturnType<Registry['identifyBySecretKeyCountingRequest']>>) => ({
              hits: f!.hits,
              poll: f!.poll ? access.pollVerdict(f!.poll, now) : ('none' as const),
            });
            const ask = (keys: string[], l: { key: number; resource: string | null }) =>
              registry.identifyBySecretKeyCountingRequest(keys[l.key]!, now, l.resource ? access.pollMarkOf(l.resource, now) : null);
            const batched = (await Promise.all(turn.lookups.map((l) => ask(batchedKeys, l)))).map(verdict);
            const alone: { hits: number; poll: Refusal | null | 'none' }[] = [];
            for (const l of turn.lookups) alone.push(verdict(await ask(aloneKeys, l)));
            expect(batched).toEqual(alone);
          }
        },
      ),
      { seed, numRuns: 25 },
    );
  });

  it('two processes sending overlapping batches in opposite key orders at once: every count of a window is given exactly once', async () => {
    // A second "process": registries of its own on its own pool. Two registries per pool
    // (each batches its own turns) so that batches also overlap within one process.
    const otherPool = createPool(db.url, { max: 5, applicationName: 'gateway-test-other' });
    try {
      const registries = [registry, new Registry(db.pool, secrets), new Registry(otherPool, secrets), new Registry(otherPool, secrets)];
      const keys = await Promise.all([0, 1, 2, 3].map(async () => (await newProject()).keys.test.secretKey));
      const now = at(7_000);
      const turns = 10;
      const turn = (r: Registry, order: string[]) =>
        Promise.all(order.flatMap((k) => [r.identifyBySecretKeyCountingRequest(k, now), r.identifyBySecretKeyCountingRequest(k, now)]));
      const reversed = [...keys].reverse();
      const results = await Promise.all(
        registries.map(async (r, i) => {
          const found = [];
          for (let t = 0; t < turns; t++) found.push(...(await turn(r, (i + t) % 2 === 0 ? keys : reversed)));
          return found;
        }),
      );
      const rounds = registries.length * turns;
      const hitsByKey = new Map<string, number[]>();
      for (const f of results.flat()) {
        expect(f).not.toBeNull();
        hitsByKey.set(f!.identity.keyId, [...(hitsByKey.get(f!.identity.keyId) ?? []), f!.hits]);
      }
      expect(hitsByKey.size).toBe(4);
      const everyCount = Array.from({ length: 2 * rounds }, (_, i) => i + 1);
      for (const [keyId, hits] of hitsByKey) {
        expect([...hits].sort((a, b) => a - b)).toEqual(everyCount);
        expect(await windowRow(keyId, Math.floor(now.getTime() / 1000))).toBe(2 * rounds);
      }
    } finally {
      await otherPool.end();
    }
  });
});
