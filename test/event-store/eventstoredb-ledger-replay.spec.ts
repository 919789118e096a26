/**
 * The ledger's replay case on a real EventStoreDB (runs only when
 * EVENTSTORE_CONNECTION_STRING is set: no server can be installed on the build
 * machines, and none is faked). EventStoreDB checks event ids only at the expected
 * revision, so an old repeat appended at the end of a ledger would be stored again:
 * only the ledger's own exact check of causes older than the window stops it.
 *
 * A realistic history of one busy merchant (its live ledger well past the window)
 * is written to the server, with PostgreSQL for the read models, registry and
 * snapshots; the process managers that post to the ledger run over it from position
 * zero twice; every ledger keeps its entries and balances, and ledger:verify passes
 * for this history's ledgers. See test/support/process-manager-replay.ts.
 */
import { randomUUID } from 'node:crypto';
import { EventStoreDbEventStore } from '#event-store/eventstoredb';
import { PAST_THE_WINDOW, processManagerReplayCase } from '../support/process-manager-replay';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const connectionString = process.env.EVENTSTORE_CONNECTION_STRING;

if (connectionString) {
  describe('the ledger on EventStoreDB: process managers replayed from zero', () => {
    jest.setTimeout(600_000);
    let db: TestDatabase;
    let store: EventStoreDbEventStore;
    beforeAll(async () => {
      db = await createTestDatabase({ poolSize: 8 });
      store = EventStoreDbEventStore.fromConnectionString(connectionString);
    });
    afterAll(async () => {
      await store.close();
      await db.drop();
    });

    it('payments, refund and payout outcomes replayed over a ledger longer than the window credit nothing again, and ledger:verify passes', async () => {
      // A fresh history each run (the server keeps what earlier runs wrote; this run's streams are its own).
      const seed = process.env.TEST_SEED ?? `esdb-pm-replay-${randomUUID()}`;
      console.log(`history seed ${seed} (TEST_SEED replays the same history)`);
      const result = await processManagerReplayCase(store, db.pool, { events: 8_000, seed });
      expect(result.longestLedger).toBeGreaterThan(PAST_THE_WINDOW);
      for (const before of result.before.values()) expect(before.problems).toEqual([]);
      expect(result.afterFirstReplay).toEqual(result.before);
      expect(result.afterSecondReplay).toEqual(result.before);
      expect(result.verifyProblems).toEqual([]);
    });
  });
} else {
  describe('the ledger on EventStoreDB: process managers replayed from zero', () => {
    it.todo('runs only when EVENTSTORE_CONNECTION_STRING is set (no EventStoreDB server can be installed on the build machines)');
  });
}
