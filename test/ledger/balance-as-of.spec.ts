/**
 * The operator's balance as of an instant (GET /admin/v1/accounts/{id}/balance?asOf=) is
 * the log's own figure (docs/audit-log.md: an auditor compares a statement drawn from the
 * read model with it): the ledger's stream read to its end, the postings of the entries
 * that occurred at or before the instant summed. On a seeded ledger with holds, late
 * payments and reservations, its answer for random instants (and at and just before
 * entries' own instants) equals the full replay of the ledger (LedgerBook.asOf, `evolve`
 * entry by entry) in every figure.
 */
import { randomUUID } from 'node:crypto';
import { PostgresEventStore, PostgresSnapshotStore } from '#event-store';
import {
  causeOf,
  evolve,
  formatMoney,
  initialLedgerState,
  LedgerAccount,
  LedgerCommand,
  ledgerDecider,
  ledgerEntryId,
  LedgerId,
  needsCauseLookup,
} from '#ledger';
import { LedgerBook } from '#payments/ledger';
import type { LedgerRequest } from '#payments/ledger';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { appendLedgerHistory } from '../support/ledger-history';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { seededRandom } from '../support/test-seed';

const ADMIN_TOKEN = 'operator-token-for-balance-as-of-tests-7';

describe('balance as of an instant, from the log', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let gateway: RunningGateway;

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function get(path: string): Promise<{ status: number; body: any }> {
    const response = await fetch(`${gateway.baseUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    return { status: response.status, body: await response.json() };
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN });
  });
  afterAll(async () => {
    await gateway.kill();
    await store.close();
    await db.drop();
  });

  it('as of random instants, the balance summed from the log equals the full replay of the ledger (seeded history)', async () => {
    const random = seededRandom('balance as of: the log summed equals the replay');
    const seeded: LedgerId = { accountId: randomUUID(), mode: 'live' };
    // Payments (some held: released in the history once due, or due in 2099, which the hold-release worker leaves),
    // some dated before the entries already posted (a payment posted late), refunds and payouts reserved, settled or released.
    let state = initialLedgerState();
    let t = Date.parse('2025-04-01T00:00:00Z');
    const due = new Map<string, number>();
    const requests: LedgerRequest[] = [];
    const offer = (request: LedgerRequest) => {
      let command = { ...request, entryId: ledgerEntryId(seeded, causeOf(request as LedgerCommand)) } as LedgerCommand;
      if (needsCauseLookup(command, state)) command = { ...command, postedBeforeWindow: false };
      const decided = ledgerDecider.decide(command, state);
      if (!Array.isArray(decided)) return false;
      requests.push(request);
      for (const e of decided) state = evolve(state, e);
      return true;
    };
    for (let i = 0; requests.length < 300; i++) {
      t += random.int(1, 600) * 1000;
      const at = new Date(t).toISOString();
      const holds = [...due].filter(([, releaseAt]) => releaseAt <= t);
      const reservations = Object.entries(state.reservations);
      const choice = random.int(0, 5);
      if (choice <= 1 || state.balances.available === 0) {
        const held = random.pick(['no', 'due', '2099'] as const);
        const releaseAt = held === 'due' ? new Date(t + random.int(1, 3600) * 1000).toISOString() : held === '2099' ? '2099-01-01T00:00:00.000Z' : null;
        const late = random.chance(0.15) ? new Date(t - random.int(1, 7200) * 1000).toISOString() : at;
        if (
          offer({ type: 'RecordPayment', invoiceId: `inv-${i}`, netAmount: random.int(1, 500_000), feeAmount: random.int(0, 5_000), releaseAt, at: late }) &&
          releaseAt &&
          held === 'due'
        )
          due.set(`inv-${i}`, Date.parse(releaseAt));
      } else if (choice === 2 && holds.length > 0) {
        const [invoiceId] = random.pick(holds);
        if (offer({ type: 'ReleaseHold', invoiceId, at })) due.delete(invoiceId);
      } else if (choice === 3) {
        offer({
          type: 'ReserveFunds',
          reservationId: `r${i}`,
          purpose: random.pick(['refund', 'payout'] as const),
          amount: random.int(1, state.balances.available),
          at,
        });
      } else if (reservations.length > 0) {
        const [reservationId, r] = random.pick(reservations);
        offer(
          random.chance(0.7)
            ? { type: 'SettleReservation', reservationId, at, feeAmount: r.purpose === 'payout' ? random.int(0, r.amount) : 0 }
            : { type: 'ReleaseReservation', reservationId, at },
        );
      }
    }
    t += 3_600_000;
    for (const invoiceId of due.keys()) offer({ type: 'ReleaseHold', invoiceId, at: new Date(t).toISOString() });
    const { events } = await appendLedgerHistory(store, seeded, requests);
    expect(new Set(events.map((e) => e.data.kind))).toEqual(
      new Set(['payment_recorded', 'hold_released', 'funds_reserved', 'reservation_settled', 'reservation_released']),
    );
    const book = new LedgerBook(store, new PostgresSnapshotStore(db.pool));
    const first = Date.parse('2025-04-01T00:00:00Z') - 7_200_000;
    const instants = [
      ...Array.from({ length: 20 }, () => new Date(first + random.int(0, t + 3_600_000 - first))),
      // An entry's own instant (inclusive), and the one just before it.
      ...Array.from({ length: 5 }, () => random.pick(events).data.occurredAt).flatMap((iso) => [new Date(iso), new Date(Date.parse(iso) - 1)]),
    ];
    for (const instant of instants) {
      const replayed = await book.asOf(seeded, instant);
      const r = await get(`/admin/v1/accounts/${seeded.accountId}/balance?mode=live&asOf=${instant.toISOString()}`);
      expect(r.status).toBe(200);
      expect(r.body).toEqual({
        accountId: seeded.accountId,
        mode: 'live',
        asOf: instant.toISOString(),
        lastEntryAt: replayed.lastEntryAt,
        available: formatMoney(replayed.state.balances.available),
        pending: formatMoney(replayed.state.balances.pending),
        reserved: formatMoney(replayed.state.balances.reserved),
        currency: 'RUB',
        system: Object.fromEntries(
          ['acquiring_clearing', 'fees', 'refunds_paid', 'payouts_sent'].map((a) => [a, formatMoney(replayed.state.balances[a as LedgerAccount])]),
        ),
        entries: replayed.state.entries,
      });
    }
  });
});
