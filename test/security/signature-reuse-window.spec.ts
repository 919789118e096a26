/**
 * Replay protection holds for as long as the timestamp window can accept a signature
 * (real PostgreSQL). A request may carry a timestamp up to TIMESTAMP_WINDOW_SECONDS
 * ahead of the gateway clock, so the window accepts it until about twice the window
 * after its first use: its used-signature mark must outlive that, whenever the sweeper
 * runs. Before, marks were swept 600 s after first use, while a request stamped 300 s
 * ahead stayed acceptable until the end of second 600 after the first use's second:
 * for up to one second, after a sweep, the same signature was accepted again.
 */
import { AccessControl, SIGNATURE_REUSE_WINDOW_SECONDS, sweepAccessMarks, TIMESTAMP_WINDOW_SECONDS } from '#payments/access';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

/** The guard's timestamp rule (merchant-auth.guard.ts): whole seconds of the gateway clock. */
const withinTimestampWindow = (timestamp: number, now: Date) => Math.abs(Math.floor(now.getTime() / 1000) - timestamp) <= TIMESTAMP_WINDOW_SECONDS;

describe('the used-signature mark outlives every moment the timestamp window accepts the request', () => {
  it('a request stamped at the edge of the window, replayed right after a sweep at the last accepted moment, is refused', async () => {
    const access = new AccessControl(db.pool, { perSecond: 60, pollIntervalSeconds: 3 });
    const firstUse = new Date(Date.UTC(2026, 10, 23, 12, 0, 0, 900));
    const timestamp = Math.floor(firstUse.getTime() / 1000) + TIMESTAMP_WINDOW_SECONDS; // as far ahead as accepted
    const signature = 'ab'.repeat(32);
    expect(withinTimestampWindow(timestamp, firstUse)).toBe(true);
    expect(await access.firstUseOfSignature(signature, firstUse)).toBe(true);

    // The last moment the window still accepts this timestamp, and a sweep just before it.
    const replayAt = new Date(firstUse.getTime() + 600_050);
    expect(withinTimestampWindow(timestamp, replayAt)).toBe(true);
    await sweepAccessMarks(db.pool, replayAt);
    expect(await access.firstUseOfSignature(signature, replayAt)).toBe(false);
  });

  it('the mark is kept at least twice the timestamp window', () => {
    expect(SIGNATURE_REUSE_WINDOW_SECONDS).toBeGreaterThan(2 * TIMESTAMP_WINDOW_SECONDS);
  });
});
