/**
 * The ledger projection writes a batch as set operations (entries, postings, the net
 * effect on open holds, balance deltas): whatever the batch boundaries, it must leave
 * the tables that applying the log one entry at a time leaves. A seeded random history
 * of several ledgers, with holds opened and released (when due, or never: no hold)
 * within one batch and across batches, reservations settled and released, and holds
 * still open at the end, is projected with batches of one entry, with random batch
 * sizes and in one batch; the checksums of the four tables must agree.
 */
import { randomUUID } from 'node:crypto';
import { PostgresEventStore, RecordedEvent } from '#event-store';
import { rebuildProjectionsTogether, resetForRebuild } from '#event-store/projections';
import { inTransaction } from '#platform/database';
import type { LedgerId } from '#ledger';
import type { LedgerRequest } from '#payments/ledger';
import { ledgerProjection, readModelChecksums } from '#payments/read-models';
import type { Random } from '../../apps/tools/src/seed/random';
import { appendLedgerHistory } from '../support/ledger-history';
import { projectToHead } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { seededRandom } from '../support/test-seed';

const LEDGER_TABLES = ['ledger_entries', 'ledger_postings', 'ledger_balances', 'ledger_open_holds'];

let db: TestDatabase;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase();
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
});
afterAll(async () => {
  await store.close();
  await db.drop();
});

/** Valid requests for one ledger: payments with and without holds, releases when due, reservations settled or released. */
function randomRequests(rng: Random, prefix: string, n: number): LedgerRequest[] {
  let clock = Date.parse('2026-03-01T00:00:00Z');
  const at = (ms: number) => new Date(ms).toISOString();
  const open = new Map<string, number>(); // invoice → release time
  const reserved = new Map<string, number>(); // reservation → amount
  let available = 0;
  let invoices = 0;
  let reservations = 0;
  const requests: LedgerRequest[] = [];
  while (requests.length < n) {
    clock += rng.int(1, 120) * 60_000;
    const due = [...open.entries()].filter(([, releaseAt]) => releaseAt <= clock);
    const roll = rng.next();
    if (roll < 0.4) {
      const invoiceId = `${prefix}-inv-${invoices++}`;
      const netAmount = rng.int(1, 50_000);
      const held = rng.chance(0.8);
      const releaseAt = held ? clock + rng.int(1, 600) * 60_000 : null;
      requests.push({
        type: 'RecordPayment',
        invoiceId,
        netAmount,
        feeAmount: rng.int(0, 500),
        releaseAt: releaseAt === null ? null : at(releaseAt),
        at: at(clock),
      });
      if (releaseAt === null) available += netAmount;
      else open.set(invoiceId, releaseAt);
    } else if (roll < 0.75 && due.length > 0) {
      const [invoiceId] = rng.pick(due);
      const payment = requests.find((r) => r.type === 'RecordPayment' && r.invoiceId === invoiceId) as Extract<LedgerRequest, { type: 'RecordPayment' }>;
      requests.push({ type: 'ReleaseHold', invoiceId, at: at(clock) });
      open.delete(invoiceId);
      available += payment.netAmount;
    } else if (roll < 0.88 && available > 0) {
      const reservationId = `${prefix}-res-${reservations++}`;
      const amount = rng.int(1, available);
      requests.push({ type: 'ReserveFunds', reservationId, purpose: rng.chance(0.5) ? 'refund' : 'payout', amount, at: at(clock) });
      reserved.set(reservationId, amount);
      available -= amount;
    } else if (reserved.size > 0) {
      const [reservationId, amount] = rng.pick([...reserved.entries()]);
      reserved.delete(reservationId);
      if (rng.chance(0.6)) requests.push({ type: 'SettleReservation', reservationId, at: at(clock) });
      else {
        requests.push({ type: 'ReleaseReservation', reservationId, at: at(clock) });
        available += amount;
      }
    }
  }
  return requests;
}

async function ledgerChecksums() {
  return readModelChecksums(db.pool, LEDGER_TABLES);
}

describe('the batched ledger projection', () => {
  it('leaves the tables of one entry at a time, whatever the batches, on a random history with holds opened and released within one batch', async () => {
    const rng = seededRandom('batched ledger projection');
    const ledgers: LedgerId[] = Array.from({ length: 4 }, (_, i) => ({ accountId: randomUUID(), mode: i % 2 === 0 ? 'live' : 'test' }));
    for (const [i, ledger] of ledgers.entries()) await appendLedgerHistory(store, ledger, randomRequests(rng, `l${i}`, rng.int(150, 300)));

    // One entry at a time: the reference.
    await projectToHead(db.pool, store, ledgerProjection, 1);
    const oneByOne = await ledgerChecksums();
    expect(oneByOne.find((t) => t.table === 'ledger_open_holds')!.rows).toBeGreaterThan(0);
    expect(oneByOne.find((t) => t.table === 'ledger_entries')!.rows).toBeGreaterThan(600);

    // Random batch sizes, through the runner.
    const batchSize = rng.int(2, 200);
    await resetForRebuild(db.pool, [ledgerProjection], { keepIndexes: true });
    await projectToHead(db.pool, store, ledgerProjection, batchSize);
    expect({ batchSize, tables: await ledgerChecksums() }).toEqual({ batchSize, tables: oneByOne });

    // The whole log in one batch, through the one-pass rebuild.
    const rebuilt = await rebuildProjectionsTogether(db.pool, store, [ledgerProjection], { batchSize: 50_000 });
    expect(rebuilt.projections[0]!.eventsApplied).toBe(BigInt(oneByOne.find((t) => t.table === 'ledger_entries')!.rows));
    expect(await ledgerChecksums()).toEqual(oneByOne);

    // A batch applied again changes nothing (idempotent by entry id).
    const events = await store.readAll({ maxCount: 100_000 });
    await inTransaction(db.pool, (tx) => ledgerProjection.apply(tx, events, undefined));
    expect(await ledgerChecksums()).toEqual(oneByOne);
  });

  it('BUG: an entry id twice in one batch (a corrupted log) is applied once, as in two batches, instead of failing the batch on the postings key', async () => {
    const ledger: LedgerId = { accountId: randomUUID(), mode: 'live' };
    const { events } = await appendLedgerHistory(store, ledger, [
      { type: 'RecordPayment', invoiceId: 'dup-1', netAmount: 700, feeAmount: 10, releaseAt: null, at: '2026-03-01T00:00:00.000Z' },
    ]);
    const [stored] = await store.readStream(`ledger-live_${ledger.accountId}`);
    const twice: RecordedEvent[] = [stored!, { ...stored!, id: randomUUID(), revision: 1n }];
    expect(events).toHaveLength(1);
    await inTransaction(db.pool, (tx) => ledgerProjection.apply(tx, twice, undefined));
    const rows = await db.pool.query<{ entries: number; postings: number; available: string }>(
      `SELECT (SELECT count(*)::int FROM ledger_entries WHERE account_id = $1) AS entries,
              (SELECT count(*)::int FROM ledger_postings p JOIN ledger_entries e USING (entry_id) WHERE e.account_id = $1) AS postings,
              (SELECT balance FROM ledger_balances WHERE account_id = $1 AND account = 'available') AS available`,
      [ledger.accountId],
    );
    expect(rows.rows[0]).toEqual({ entries: 1, postings: (stored!.data.postings as unknown[]).length, available: '700' });
  });
});
