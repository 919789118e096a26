/**
 * Replaying the process managers posts nothing twice, on a store that checks event
 * ids only at the expected revision (as EventStoreDB): the in-memory implementation
 * of the port, with PostgreSQL for the read models, registry and snapshots. See
 * test/support/process-manager-replay.ts. The same case runs against a real
 * EventStoreDB in test/event-store/eventstoredb-ledger-replay.spec.ts when one is
 * configured; on PostgreSQL, with the real projector process and its checkpoints
 * reset, in test/operations/process-manager-replay.spec.ts.
 *
 * This is the regression test of item 3: before the book looked causes older than
 * the window up in the log, the replays posted old payments and outcomes again.
 */
import { InMemoryEventStore } from '../support/in-memory-event-store';
import { PAST_THE_WINDOW, processManagerReplayCase } from '../support/process-manager-replay';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** With one merchant, its live ledger gets some 2,500 entries: past the window of 2,000 causes. */
const EVENTS = 8_000;

jest.setTimeout(240_000);

describe('process managers replayed from zero on a store that checks event ids only at the expected revision', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 8 });
  });
  afterAll(async () => {
    await db.drop();
  });

  it('BUG: payments, refund and payout outcomes replayed over a ledger longer than the window credit nothing again, and ledger:verify passes', async () => {
    const store = new InMemoryEventStore({ eventIds: 'checked_at_expected_revision' });
    const result = await processManagerReplayCase(store, db.pool, { events: EVENTS, seed: 'pm-replay' });
    expect(result.longestLedger).toBeGreaterThan(PAST_THE_WINDOW);
    for (const before of result.before.values()) expect(before.problems).toEqual([]);
    // Identical entry counts and balances, every invariant kept, no cause twice.
    expect(result.afterFirstReplay).toEqual(result.before);
    expect(result.afterSecondReplay).toEqual(result.before);
    expect(result.verifyProblems).toEqual([]);
    expect(result.snapshotsVerified).toBeGreaterThan(0);
  });
});
