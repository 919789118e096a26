/**
 * A Bearer read of one invoice or payout takes its poll mark in the key's own lookup
 * statement (with the rate count), so the read costs one round trip less. The rule must
 * be the one AccessControl.admitPoll applies on its own (the HMAC path): the same
 * verdicts on the same timeline, a request over the per-key rate marks nothing, an
 * unknown key marks nothing, and concurrent reads take the mark once (real PostgreSQL).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { AccessControl, PollMarkResult, Refusal } from '#payments/access';
import { Registry } from '#payments/merchants';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;
let registry: Registry;
const start = new Date('2026-11-23T12:00:00.250Z');
const at = (ms: number) => new Date(start.getTime() + ms);

beforeAll(async () => {
  db = await createTestDatabase();
  registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
});
afterAll(async () => {
  await db.drop();
});

async function testKey(): Promise<{ secretKey: string; keyId: string }> {
  const account = await registry.createAccount('Poll Ltd', `poll-${randomUUID()}@example.com`, start);
  const { keys } = await registry.createProject(
    account.id,
    { name: 'shop', status: 'active', webhookUrl: null, webhookEvents: [], usdtEnabled: false, holdHours: 24, methodOverrides: {}, customerFeeShare: 0 },
    start,
  );
  const found = await registry.identifyBySecretKeyCountingRequest(keys.test.secretKey, at(-60_000));
  return { secretKey: keys.test.secretKey, keyId: found!.identity.keyId };
}

/** The guard's Bearer path: the lookup takes the mark, AccessControl judges it. */
async function readWithLookup(access: AccessControl, secretKey: string, resource: string, now: Date): Promise<{ hits: number; poll: Refusal | null | 'none' }> {
  const counted = await registry.identifyBySecretKeyCountingRequest(secretKey, now, access.pollMarkOf(resource, now));
  if (!counted) throw new Error('key not found');
  const result: PollMarkResult | null = counted.poll;
  return { hits: counted.hits, poll: result ? access.pollVerdict(result, now) : 'none' };
}

const pollMarks = async () => (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM poll_marks')).rows[0]!.n;

describe("the poll mark taken with the key's lookup", () => {
  it('gives the verdicts admitPoll gives on the same timeline (taken, refused with the remaining wait, taken again after the interval)', async () => {
    const access = new AccessControl(db.pool, { perSecond: 60, pollIntervalSeconds: 3 });
    const bearer = await testKey();
    const hmac = await testKey();
    const timeline = [0, 400, 1_100, 2_300, 2_999, 3_000, 3_500, 6_100, 6_200];
    const withLookup: (Refusal | null | 'none')[] = [];
    const alone: (Refusal | null)[] = [];
    for (const ms of timeline) {
      withLookup.push((await readWithLookup(access, bearer.secretKey, 'invoice:a', at(ms))).poll);
      alone.push(await access.admitPoll(hmac.keyId, 'invoice:a', at(ms)));
    }
    expect(withLookup).toEqual(alone);
    expect(alone.map((r) => (r === null ? 'taken' : r.retryAfterSeconds))).toEqual(['taken', 3, 2, 1, 1, 'taken', 3, 'taken', 3]);
  });

  it('a request over the per-key rate takes no mark: the same read in the next second is answered', async () => {
    const access = new AccessControl(db.pool, { perSecond: 3, pollIntervalSeconds: 3 });
    const key = await testKey();
    for (const resource of ['invoice:a', 'invoice:b', 'invoice:c']) {
      expect(await readWithLookup(access, key.secretKey, resource, at(100))).toEqual({ hits: expect.any(Number), poll: null });
    }
    const over = await readWithLookup(access, key.secretKey, 'invoice:d', at(200));
    expect(over.hits).toBe(4);
    expect(await access.admitCounted(over.hits, at(200))).toEqual({ code: 'rate_limited', retryAfterSeconds: 1 });
    // Refused by the rate: the poll mark of invoice:d was not taken.
    expect(await readWithLookup(access, key.secretKey, 'invoice:d', at(1_100))).toEqual({ hits: 1, poll: null });
  });

  it('an unknown key marks nothing, and a lookup without a route mark reports none', async () => {
    const access = new AccessControl(db.pool, { perSecond: 60, pollIntervalSeconds: 3 });
    const before = await pollMarks();
    expect(await registry.identifyBySecretKeyCountingRequest(`sk_test_${'x'.repeat(32)}`, at(0), access.pollMarkOf('invoice:z', at(0)))).toBeNull();
    expect(await pollMarks()).toBe(before);
    const key = await testKey();
    expect((await registry.identifyBySecretKeyCountingRequest(key.secretKey, at(0)))?.poll).toBeNull();
    expect(await pollMarks()).toBe(before);
  });

  it('with POLL_INTERVAL_SECONDS=0 there is no mark to take', () => {
    const access = new AccessControl(db.pool, { perSecond: 60, pollIntervalSeconds: 0 });
    expect(access.pollMarkOf('invoice:a', at(0))).toBeNull();
  });

  it('20 concurrent reads of one resource: the mark is taken once, the others wait at most one interval', async () => {
    const access = new AccessControl(db.pool, { perSecond: 60, pollIntervalSeconds: 3 });
    const key = await testKey();
    const verdicts = await Promise.all(Array.from({ length: 20 }, () => readWithLookup(access, key.secretKey, 'payout:7', at(10_000))));
    expect(verdicts.filter((v) => v.poll === null)).toHaveLength(1);
    for (const v of verdicts.filter((v) => v.poll !== null)) {
      expect(v.poll).toEqual({ code: 'rate_limited', retryAfterSeconds: expect.any(Number) });
      const wait = (v.poll as Refusal).retryAfterSeconds;
      expect(wait >= 1 && wait <= 3).toBe(true);
    }
  });
});
