/**
 * Refunds and payouts under real concurrency: two HTTP processes on one database (the
 * whole gateway, with the projector and workers, and a second API process), each
 * burst sent over both at once with Promise.all, CLOCK=manual shared through the
 * database. Every case asserts the exact outcome, and cross-checks what the clients
 * were told against the ledger's event log (GET /admin/v1/streams/ledger-…), the
 * balance rebuilt from it (GET /admin/v1/accounts/{id}/balance) and the read model
 * (GET /v1/balance); at the end `ledger:verify` must find nothing wrong.
 *
 * REFUND_PROCESSING_SECONDS is an hour, so that refunds stay pending for as long as a
 * test looks at them (the manual clock also runs in real time); the tests move the
 * clock past it when refunds are to succeed.
 */
import { RunningGateway, startGateway, startProcess } from '../support/gateway-process';
import { ADMIN_TOKEN, api, Client, expectError, expectStatus, Json, Merchant, Mode, MONEY, Operator, orderId, poll, Reply } from '../support/merchant-fixtures';
import {
  Balance,
  balanceOf,
  fromKopecks,
  instantMerchant,
  paidInvoice,
  PHONE,
  payoutAddress,
  toKopecks,
  transition,
  waitForBalance,
} from '../support/money-out-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { holdAppendLock } from '../support/append-lock';

const REFUND_PROCESSING_SECONDS = 3600;
const REFUND_ID = /^rf_[0-9a-z]{24}$/;

interface LedgerEntry {
  readonly entryId: string;
  readonly kind: string;
  readonly cause: string;
  readonly postings: readonly { account: string; amount: number }[];
  readonly reservation?: { id: string; purpose: 'refund' | 'payout'; amount: number };
  readonly refusal?: string;
}

describe('refunds and payouts under concurrency (gateway + a second API process, one database)', () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  let second: RunningGateway;
  /** The operator API of the gateway (API + projector + workers) and of the second API process. */
  let opA: Operator;
  let opB: Operator;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    const env = {
      DATABASE_URL: db.url,
      ADMIN_TOKEN,
      CLOCK: 'manual',
      REFUND_PROCESSING_SECONDS: String(REFUND_PROCESSING_SECONDS),
      // Reads one invoice (or payout) several times in a row to follow its state; the poll rule has its own suite (rate-limits.spec.ts).
      POLL_INTERVAL_SECONDS: '0',
    };
    gateway = await startGateway('gateway', env);
    second = await startGateway('api', env);
    opA = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    opB = new Operator(second.baseUrl, ADMIN_TOKEN);
    // Warm both servers up, so that a burst measures the gateway and not TCP handshakes.
    for (const url of [gateway.baseUrl, second.baseUrl]) {
      await Promise.all(Array.from({ length: 20 }, () => fetch(`${url}/v1/nope`).then((r) => r.arrayBuffer())));
    }
  });

  afterAll(async () => {
    await gateway?.kill();
    await second?.kill();
    await db?.drop();
  });

  // ---------------------------------------------------------------------------------
  // Helpers

  /** The merchant's key of `mode` on both processes: index 0 the gateway, 1 the second API process. */
  const clientsOf = (m: Merchant, mode: Mode): [Client, Client] => [api(gateway.baseUrl, m.keys[mode].secretKey), api(second.baseUrl, m.keys[mode].secretKey)];

  /** n requests at once, alternating between the two processes. */
  const burst = (n: number, clients: [Client, Client], send: (client: Client, i: number) => Promise<Reply>): Promise<Reply[]> =>
    Promise.all(Array.from({ length: n }, (_, i) => send(clients[i % 2]!, i)));

  /** How many replies of each kind: "202", "201", "422 insufficient_balance", ... */
  const tally = (replies: readonly Reply[]): Record<string, number> => {
    const counts: Record<string, number> = {};
    for (const r of replies) {
      const key = r.status < 300 ? String(r.status) : `${r.status} ${r.body?.error?.code}`;
      counts[key] = (counts[key] ?? 0) + 1;
    }
    return counts;
  };

  /** Moves the shared manual clock, and makes both processes follow it at once. */
  const advanceBoth = async (seconds: number) => {
    await opA.advance(seconds);
    await opB.advance(0);
  };

  /** Every entry of the ledger's event stream (the log, not the read model), oldest first. */
  const ledgerLog = async (accountId: string, mode: Mode): Promise<LedgerEntry[]> => {
    const entries: LedgerEntry[] = [];
    let from = 0;
    for (;;) {
      const r = await opA.http.get(`/admin/v1/streams/ledger-${mode}_${accountId}?fromRevision=${from}&limit=1000`);
      expectStatus(r, 200);
      entries.push(...(r.body.events as Json[]).map((e) => e.data as LedgerEntry));
      if (r.body.nextRevision === null) return entries;
      from = r.body.nextRevision;
    }
  };

  /** The journal from the read model (GET /admin/v1/accounts/{id}/ledger), all pages. */
  const journal = async (accountId: string, mode: Mode): Promise<Json[]> => {
    const items: Json[] = [];
    let cursor: string | null = null;
    do {
      const r: Reply = await opB.http.get(
        `/admin/v1/accounts/${accountId}/ledger?mode=${mode}&limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expectStatus(r, 200);
      items.push(...r.body.items);
      cursor = r.body.nextCursor;
    } while (cursor);
    return items;
  };

  /** The balance rebuilt from the event log by the operator API. */
  const liveBalance = async (accountId: string, mode: Mode): Promise<Json> => {
    const r = await opB.http.get(`/admin/v1/accounts/${accountId}/balance?mode=${mode}`);
    expectStatus(r, 200);
    return r.body;
  };
  const merchantPart = (b: Json): Balance => ({ available: b.available, pending: b.pending, reserved: b.reserved });

  /** Waits until the ledger (from the log) says `expected`: the outcome workers post asynchronously. */
  const waitForLedger = (accountId: string, mode: Mode, expected: Balance): Promise<Json> =>
    poll(
      () => liveBalance(accountId, mode),
      (b) => b.available === expected.available && b.pending === expected.pending && b.reserved === expected.reserved,
      `ledger ${mode} of ${accountId} at ${JSON.stringify(expected)}`,
      15_000,
    );

  /** The ledger's merchant accounts after every entry of the log: the least each one ever was. */
  const lowestEver = (entries: readonly LedgerEntry[]): Record<'available' | 'pending' | 'reserved', number> => {
    const now = { available: 0, pending: 0, reserved: 0 };
    const low = { available: 0, pending: 0, reserved: 0 };
    for (const e of entries) {
      for (const p of e.postings) {
        if (p.account in now) {
          const k = p.account as keyof typeof now;
          now[k] += p.amount;
          low[k] = Math.min(low[k], now[k]);
        }
      }
    }
    return low;
  };

  const reservationsOf = (entries: readonly LedgerEntry[], kind: string, purpose: 'refund' | 'payout') =>
    entries.filter((e) => e.kind === kind && e.reservation?.purpose === purpose);

  const refusalsOf = (entries: readonly LedgerEntry[], purpose: 'refund' | 'payout') =>
    reservationsOf(entries, 'reservation_refused', purpose)
      .map((e) => e.refusal)
      .sort();

  const invoiceEvents = async (invoiceId: string): Promise<Json[]> => {
    const r = await opA.http.get(`/admin/v1/streams/invoice-${invoiceId}?limit=1000`);
    expectStatus(r, 200);
    return r.body.events;
  };

  const getInvoice = async (client: Client, invoiceId: string): Promise<Json> => {
    const r = await client.get(`/v1/invoices/${invoiceId}`);
    expectStatus(r, 200);
    return r.body;
  };

  /** Waits until the invoice (read from its stream) shows the refunded amount and status. */
  const waitForRefunded = (client: Client, invoiceId: string, refundedAmount: string, status: string): Promise<Json> =>
    poll(
      () => getInvoice(client, invoiceId),
      (i) => i.refundedAmount === refundedAmount && i.status === status,
      `invoice ${invoiceId} refunded ${refundedAmount} (${status})`,
      15_000,
    );

  const refund = (client: Client, invoiceId: string, amount?: string) =>
    client.post(`/v1/invoices/${invoiceId}/refund`, amount === undefined ? undefined : { amount });

  /** An accepted refund: 202, pending, of the invoice and amount. */
  const expectRefundAccepted = (r: Reply, invoiceId: string, amount: string) => {
    expectStatus(r, 202);
    expect(r.body).toMatchObject({ invoiceId, amount, currency: 'RUB', status: 'pending', completedAt: null });
    expect(r.body.id).toMatch(REFUND_ID);
  };

  /** An accepted payout: 201, pending, SBP with the 1.00 % fee. */
  const expectPayoutCreated = (r: Reply, amount: string) => {
    expectStatus(r, 201);
    const fee = Math.floor(toKopecks(amount) / 100);
    expect(r.body).toMatchObject({
      status: 'pending',
      amount,
      feeAmount: fromKopecks(fee),
      netAmount: fromKopecks(toKopecks(amount) - fee),
      currency: 'RUB',
      method: 'sbp',
      source: 'api',
    });
    expect(Number.isSafeInteger(r.body.id) && r.body.id > 0).toBe(true);
  };

  const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

  /** A live merchant (holdHours 0) with `amounts` paid in live mode and a confirmed SBP payout detail. */
  const liveMerchant = async (amounts: readonly string[]) => {
    const m = await instantMerchant(opA);
    let total = 0;
    for (const amount of amounts) {
      await paidInvoice(opA, m.live, amount);
      total += toKopecks(amount);
    }
    await waitForBalance(m.live, { available: fromKopecks(total), pending: '0.00', reserved: '0.00' });
    const address = await payoutAddress(opA, m.accountId, { method: 'sbp', account: PHONE });
    return { m, addressId: address.id as number };
  };

  // ---------------------------------------------------------------------------------

  describe('concurrent refunds of one invoice', () => {
    it('20 refunds of 75.00 of a paid 1000.00 invoice (balance ample): exactly 13 accepted, 7 refund_exceeds_amount; 975.00 refunded after processing', async () => {
      const m = await instantMerchant(opA);
      const invoiceId = await paidInvoice(opA, m.test, '1000.00');
      // A second paid invoice: the balance (2000.00) is well above what may be refunded.
      await paidInvoice(opA, m.test, '1000.00');
      await waitForBalance(m.test, { available: '2000.00', pending: '0.00', reserved: '0.00' });

      const replies = await burst(20, clientsOf(m, 'test'), (c) => refund(c, invoiceId, '75.00'));

      expect(tally(replies)).toEqual({ '202': 13, '422 refund_exceeds_amount': 7 });
      const accepted = replies.filter((r) => r.status === 202);
      for (const r of accepted) expectRefundAccepted(r, invoiceId, '75.00');
      for (const r of replies.filter((x) => x.status !== 202)) expectError(r, 422, 'refund_exceeds_amount', 'amount');
      const ids = accepted.map((r) => r.body.id as string);
      expect(new Set(ids).size).toBe(13);
      // Both processes accepted some (the burst really went through both).
      expect(replies.filter((r, i) => i % 2 === 0 && r.status === 202).length).toBeGreaterThan(0);
      expect(replies.filter((r, i) => i % 2 === 1 && r.status === 202).length).toBeGreaterThan(0);
      expect(sum(accepted.map((r) => toKopecks(r.body.amount)))).toBe(97_500);

      // Reserved at once, in the log and (eventually) in the read model.
      const reserved = { available: '1025.00', pending: '0.00', reserved: '975.00' };
      expect(merchantPart(await liveBalance(m.accountId, 'test'))).toEqual(reserved);
      await waitForBalance(m.test, reserved);

      // The ledger asked for exactly the accepted ones: 13 reservations, no refusal.
      const log = await ledgerLog(m.accountId, 'test');
      const reservations = reservationsOf(log, 'funds_reserved', 'refund');
      expect(reservations).toHaveLength(13);
      expect(reservations.map((e) => e.reservation!.id).sort()).toEqual([...ids].sort());
      expect(reservations.every((e) => e.reservation!.amount === 7_500)).toBe(true);
      expect(refusalsOf(log, 'refund')).toEqual([]);
      // The operator's journal reads the ledger read model alone (the balance above adds the entries it lacks): wait for it.
      const reserveCauses = (entries: Json[]) => entries.filter((e) => e.kind === 'funds_reserved').map((e) => String(e.cause));
      const journalReserves = await poll(
        async () => reserveCauses(await journal(m.accountId, 'test')),
        (causes) => causes.length >= ids.length,
        'the ledger read model to hold the reservations',
      );
      expect(journalReserves.sort()).toEqual(ids.map((id) => `reserve:${id}`).sort());

      // The invoice: still paid (nothing refunded yet), 13 requests on its stream.
      const before = await getInvoice(m.test, invoiceId);
      expect({ status: before.status, refundedAmount: before.refundedAmount }).toEqual({ status: 'paid', refundedAmount: '0.00' });
      expect((await invoiceEvents(invoiceId)).filter((e) => e.type === 'InvoiceRefundRequested')).toHaveLength(13);

      // Processing: past REFUND_PROCESSING_SECONDS every one succeeds.
      await advanceBoth(REFUND_PROCESSING_SECONDS + 1);
      const after = await waitForRefunded(m.test, invoiceId, '975.00', 'partially_refunded');
      expect(after.amount).toBe('1000.00');
      for (const [i, id] of ids.entries()) {
        const r = await clientsOf(m, 'test')[i % 2].get(`/v1/refunds/${id}`);
        expectStatus(r, 200);
        expect(r.body).toMatchObject({ id, invoiceId, amount: '75.00', status: 'succeeded' });
        expect(r.body.completedAt).not.toBeNull();
      }
      const settled = { available: '1025.00', pending: '0.00', reserved: '0.00' };
      const ledger = await waitForLedger(m.accountId, 'test', settled);
      expect(ledger.system.refunds_paid).toBe('975.00');
      await waitForBalance(m.test, settled);
      expect(reservationsOf(await ledgerLog(m.accountId, 'test'), 'reservation_settled', 'refund')).toHaveLength(13);

      // What is left is 25.00 exactly: 25.01 is too much, a full refund takes 25.00.
      expectError(await refund(m.test, invoiceId, '25.01'), 422, 'refund_exceeds_amount', 'amount');
      const rest = await refund(clientsOf(m, 'test')[1], invoiceId);
      expectRefundAccepted(rest, invoiceId, '25.00');
      await advanceBoth(REFUND_PROCESSING_SECONDS + 1);
      await waitForRefunded(m.test, invoiceId, '1000.00', 'refunded');
      await waitForBalance(m.test, { available: '1000.00', pending: '0.00', reserved: '0.00' });
    });

    it('the balance is the limit: available 500.00, invoice 2000.00, 20 refunds of 100.00 → exactly 5 accepted, 15 insufficient_balance', async () => {
      // One account, two projects: the invoice's project holds payments (24 h, so its
      // money is pending), the other releases at once and funds `available` with 500.00.
      const held = await opA.merchant({ holdHours: 24 });
      const instant = await instantMerchant(opA, held.accountId);
      const invoiceId = await paidInvoice(opA, held.test, '2000.00');
      await paidInvoice(opA, instant.test, '500.00');
      await waitForBalance(held.test, { available: '500.00', pending: '2000.00', reserved: '0.00' });

      const replies = await burst(20, clientsOf(held, 'test'), (c) => refund(c, invoiceId, '100.00'));

      expect(tally(replies)).toEqual({ '202': 5, '422 insufficient_balance': 15 });
      for (const r of replies.filter((x) => x.status === 202)) expectRefundAccepted(r, invoiceId, '100.00');
      for (const r of replies.filter((x) => x.status !== 202)) expectError(r, 422, 'insufficient_balance');

      const limit = { available: '0.00', pending: '2000.00', reserved: '500.00' };
      expect(merchantPart(await liveBalance(held.accountId, 'test'))).toEqual(limit);
      await waitForBalance(held.test, limit);
      const log = await ledgerLog(held.accountId, 'test');
      expect(reservationsOf(log, 'funds_reserved', 'refund')).toHaveLength(5);
      expect(refusalsOf(log, 'refund')).toEqual(Array(15).fill('insufficient_balance'));
      expect(lowestEver(log)).toEqual({ available: 0, pending: 0, reserved: 0 });

      // Every refused request went back to the invoice's remainder: 2000 − 500 pending = 1500.00.
      const events = await invoiceEvents(invoiceId);
      expect(events.filter((e) => e.type === 'InvoiceRefundRequested')).toHaveLength(20);
      expect(events.filter((e) => e.type === 'InvoiceRefundReleased').map((e) => e.data.reason)).toEqual(Array(15).fill('refused'));
      expectError(await refund(held.test, invoiceId, '1500.01'), 422, 'refund_exceeds_amount', 'amount');
      expectError(await refund(held.test, invoiceId, '1500.00'), 422, 'insufficient_balance');
      // Settle the five; the rest of the invoice is then its to refund once funded.
      await advanceBoth(REFUND_PROCESSING_SECONDS + 1);
      await waitForRefunded(held.test, invoiceId, '500.00', 'partially_refunded');
      await paidInvoice(opA, instant.test, '1500.00');
      await waitForBalance(held.test, { available: '1500.00', pending: '2000.00', reserved: '0.00' });
      expectRefundAccepted(await refund(held.test, invoiceId), invoiceId, '1500.00');
      await advanceBoth(REFUND_PROCESSING_SECONDS + 1);
      await waitForRefunded(held.test, invoiceId, '2000.00', 'refunded');
      await waitForBalance(held.test, { available: '0.00', pending: '2000.00', reserved: '0.00' });
    });

    it('both limits at once: available 500.00, invoice 1000.00, 20 refunds of 100.00 → exactly 5 accepted; the refused go back to the remainder', async () => {
      const held = await opA.merchant({ holdHours: 24 });
      const instant = await instantMerchant(opA, held.accountId);
      const invoiceId = await paidInvoice(opA, held.test, '1000.00');
      await paidInvoice(opA, instant.test, '500.00');
      await waitForBalance(held.test, { available: '500.00', pending: '1000.00', reserved: '0.00' });

      const replies = await burst(20, clientsOf(held, 'test'), (c) => refund(c, invoiceId, '100.00'));

      // The balance allows 5, the invoice 10. A request that the ledger refuses holds its
      // part of the remainder until it is returned, so a request that meets the invoice
      // at that moment is told refund_exceeds_amount: which of the two a refused request
      // gets is a race, but the total is not, and each answer matches the record.
      const t = tally(replies);
      expect(t['202']).toBe(5);
      const insufficient = t['422 insufficient_balance'] ?? 0;
      const exceeds = t['422 refund_exceeds_amount'] ?? 0;
      expect(insufficient + exceeds).toBe(15);
      // At least ten were granted by the invoice (its remainder holds ten), so at least five refused by the ledger.
      expect(insufficient).toBeGreaterThanOrEqual(5);
      for (const r of replies.filter((x) => x.status === 202)) expectRefundAccepted(r, invoiceId, '100.00');
      for (const r of replies.filter((x) => x.body?.error?.code === 'insufficient_balance')) expectError(r, 422, 'insufficient_balance');
      for (const r of replies.filter((x) => x.body?.error?.code === 'refund_exceeds_amount')) expectError(r, 422, 'refund_exceeds_amount', 'amount');

      const log = await ledgerLog(held.accountId, 'test');
      expect(reservationsOf(log, 'funds_reserved', 'refund')).toHaveLength(5);
      expect(refusalsOf(log, 'refund')).toEqual(Array(insufficient).fill('insufficient_balance'));
      const events = await invoiceEvents(invoiceId);
      expect(events.filter((e) => e.type === 'InvoiceRefundRequested')).toHaveLength(5 + insufficient);
      expect(events.filter((e) => e.type === 'InvoiceRefundReleased').map((e) => e.data.reason)).toEqual(Array(insufficient).fill('refused'));

      const limit = { available: '0.00', pending: '1000.00', reserved: '500.00' };
      expect(merchantPart(await liveBalance(held.accountId, 'test'))).toEqual(limit);
      await waitForBalance(held.test, limit);

      // The remainder is 500.00 (not 0): a full refund is refused for the balance, not the amount.
      expectError(await refund(held.test, invoiceId), 422, 'insufficient_balance');
      expectError(await refund(held.test, invoiceId, '500.01'), 422, 'refund_exceeds_amount', 'amount');
      // ...and succeeds once the balance is there.
      await paidInvoice(opA, instant.test, '500.00');
      await waitForBalance(held.test, { available: '500.00', pending: '1000.00', reserved: '500.00' });
      expectRefundAccepted(await refund(clientsOf(held, 'test')[1], invoiceId), invoiceId, '500.00');
      expectError(await refund(held.test, invoiceId), 422, 'refund_exceeds_amount');
      await advanceBoth(REFUND_PROCESSING_SECONDS + 1);
      await waitForRefunded(held.test, invoiceId, '1000.00', 'refunded');
      await waitForBalance(held.test, { available: '0.00', pending: '1000.00', reserved: '0.00' });
    });
  });

  // ---------------------------------------------------------------------------------

  describe('concurrent payouts', () => {
    it('available 1000.00, 20 payouts of 400.00 with distinct orderIds → exactly 2 created, 18 insufficient_balance; available never negative', async () => {
      const { m, addressId } = await liveMerchant(['1000.00']);
      const orderIds = Array.from({ length: 20 }, () => orderId('po'));

      const replies = await burst(20, clientsOf(m, 'live'), (c, i) => c.post('/v1/payouts', { amount: '400.00', addressId, orderId: orderIds[i] }));

      // Two unfinished payouts are below the limit of three: the balance alone refuses.
      expect(tally(replies)).toEqual({ '201': 2, '422 insufficient_balance': 18 });
      const created = replies.filter((r) => r.status === 201);
      for (const r of created) expectPayoutCreated(r, '400.00');
      for (const r of replies.filter((x) => x.status !== 201)) expectError(r, 422, 'insufficient_balance', 'amount');
      expect(new Set(created.map((r) => r.body.id)).size).toBe(2);

      const expected = { available: '200.00', pending: '0.00', reserved: '800.00' };
      expect(merchantPart(await liveBalance(m.accountId, 'live'))).toEqual(expected);
      await waitForBalance(m.live, expected);
      const log = await ledgerLog(m.accountId, 'live');
      expect(
        reservationsOf(log, 'funds_reserved', 'payout')
          .map((e) => e.reservation!.id)
          .sort(),
      ).toEqual(created.map((r) => `po_${r.body.id}`).sort());
      expect(refusalsOf(log, 'payout')).toEqual(Array(18).fill('insufficient_balance'));
      expect(lowestEver(log)).toEqual({ available: 0, pending: 0, reserved: 0 });

      // The created ones are found by their orderId; the refused orderIds are free (404).
      for (const [i, r] of replies.entries()) {
        const found = await clientsOf(m, 'live')[i % 2].get(`/v1/payouts?orderId=${encodeURIComponent(orderIds[i]!)}`);
        if (r.status === 201) {
          expectStatus(found, 200);
          expect(found.body.id).toBe(r.body.id);
        } else expectError(found, 404, 'not_found');
      }
    });

    it('available 100000.00, 20 payouts of 150.00 with distinct orderIds → exactly 3 created, 17 too_many_pending', async () => {
      const { m, addressId } = await liveMerchant(['100000.00']);

      const replies = await burst(20, clientsOf(m, 'live'), (c) => c.post('/v1/payouts', { amount: '150.00', addressId, orderId: orderId('po') }));

      expect(tally(replies)).toEqual({ '201': 3, '409 too_many_pending': 17 });
      const created = replies.filter((r) => r.status === 201);
      for (const r of created) expectPayoutCreated(r, '150.00');
      for (const r of replies.filter((x) => x.status !== 201)) expectError(r, 409, 'too_many_pending');

      const expected = { available: '99550.00', pending: '0.00', reserved: '450.00' };
      expect(merchantPart(await liveBalance(m.accountId, 'live'))).toEqual(expected);
      await waitForBalance(m.live, expected);
      const log = await ledgerLog(m.accountId, 'live');
      expect(reservationsOf(log, 'funds_reserved', 'payout')).toHaveLength(3);
      expect(refusalsOf(log, 'payout')).toEqual(Array(17).fill('too_many_pending'));

      // The limit counts unfinished payouts: once one is rejected, exactly one more fits.
      expectStatus(await transition(opB, created[0]!.body.id, 'reject', { reason: 'Проверка не пройдена' }), 200);
      await waitForLedger(m.accountId, 'live', { available: '99700.00', pending: '0.00', reserved: '300.00' });
      const again = await burst(6, clientsOf(m, 'live'), (c) => c.post('/v1/payouts', { amount: '150.00', addressId, orderId: orderId('po') }));
      expect(tally(again)).toEqual({ '201': 1, '409 too_many_pending': 5 });
      await waitForBalance(m.live, { available: '99550.00', pending: '0.00', reserved: '450.00' });
    });

    it('20 identical requests with one orderId → one payout: exactly one 201, the others 200 with the same id; one reservation', async () => {
      const { m, addressId } = await liveMerchant(['1000.00']);
      const order = orderId('po-same');

      const replies = await burst(20, clientsOf(m, 'live'), (c) => c.post('/v1/payouts', { amount: '150.00', addressId, orderId: order }));

      expect(tally(replies)).toEqual({ '200': 19, '201': 1 });
      const id = replies.find((r) => r.status === 201)!.body.id;
      for (const r of replies) {
        expect(r.body).toMatchObject({ id, orderId: order, amount: '150.00', feeAmount: '1.50', netAmount: '148.50', status: 'pending' });
      }

      const log = await ledgerLog(m.accountId, 'live');
      expect(reservationsOf(log, 'funds_reserved', 'payout').map((e) => e.reservation!.id)).toEqual([`po_${id}`]);
      expect(refusalsOf(log, 'payout')).toEqual([]);
      const expected = { available: '850.00', pending: '0.00', reserved: '150.00' };
      expect(merchantPart(await liveBalance(m.accountId, 'live'))).toEqual(expected);
      await waitForBalance(m.live, expected);
      const byOrder = await m.live.get(`/v1/payouts?orderId=${encodeURIComponent(order)}`);
      expectStatus(byOrder, 200);
      expect(byOrder.body.id).toBe(id);
    });

    it('a GET while the request that wrote the payout awaits the ledger, which refuses it: shown rejected, and the request answers 201 rejected', async () => {
      // The two runs ordered for real: the request runs on the second API process, which is
      // stopped (SIGSTOP) while its session waits for the ledger's append lock, held here.
      // Once the lock goes, that session appends the ledger's refusal; the gateway's GET
      // then comes before the stopped request records it, and the request goes on after.
      const { m, addressId } = await liveMerchant(['500.00']);
      const [viaGateway, viaSecond] = clientsOf(m, 'live');
      const order = orderId('po-read-first');
      const ledger = await holdAppendLock(db.url, `ledger-live_${m.accountId}`);
      let stopped = false;
      try {
        const asked = viaSecond.post('/v1/payouts', { amount: '900.00', addressId, orderId: order });
        await ledger.waitedForBy(1);
        stopped = second.child.kill('SIGSTOP');
        await ledger.release();
        await poll(
          () => ledgerLog(m.accountId, 'live'),
          (log) => refusalsOf(log, 'payout').length === 1,
          "the ledger's refusal",
        );

        const shown = await viaGateway.get(`/v1/payouts?orderId=${encodeURIComponent(order)}`);
        expectStatus(shown, 200);
        expect(shown.body).toMatchObject({ orderId: order, amount: '900.00', status: 'rejected', statusReason: expect.stringMatching(/недостаточно средств/) });

        second.child.kill('SIGCONT');
        stopped = false;
        const answered = await asked;
        // Its answer is what is recorded: the payout as the GET left it, not a refusal of a payout already shown.
        expectStatus(answered, 201);
        expect(answered.body).toEqual(shown.body);
        const events = await opA.http.get(`/admin/v1/streams/payout-${shown.body.id}`);
        expect((events.body.events as Json[]).map((e) => e.type)).toEqual(['PayoutRequested', 'PayoutRejected']);
        expect((await viaSecond.get(`/v1/payouts/${shown.body.id}`)).body).toEqual(shown.body);
        // The orderId stays with the rejected payout.
        const again = await viaGateway.post('/v1/payouts', { amount: '900.00', addressId, orderId: order });
        expectStatus(again, 200);
        expect(again.body).toEqual(shown.body);
        const notice = await poll(
          () => viaGateway.get('/v1/events?type=payout.rejected'),
          (r) => r.status === 200 && r.body.items.length > 0,
          'the payout.rejected event',
        );
        expect(notice.body.items.map((e: Json) => e.data.payout)).toEqual([shown.body]);
      } finally {
        if (stopped) second.child.kill('SIGCONT');
        await ledger.release();
      }
    });

    it('20 identical requests without orderId (same amount and detail) → exactly one 201, 19 duplicate_request', async () => {
      const { m, addressId } = await liveMerchant(['1000.00']);

      // Half name the detail by its id, half by method and account: the same detail either way.
      const replies = await burst(20, clientsOf(m, 'live'), (c, i) =>
        c.post('/v1/payouts', i % 4 < 2 ? { amount: '150.00', addressId } : { amount: '150.00', method: 'sbp', account: PHONE }),
      );

      expect(tally(replies)).toEqual({ '201': 1, '409 duplicate_request': 19 });
      const created = replies.find((r) => r.status === 201)!;
      expectPayoutCreated(created, '150.00');
      expect(created.body).toMatchObject({ addressId, orderId: null });
      for (const r of replies.filter((x) => x.status !== 201)) expectError(r, 409, 'duplicate_request');

      const log = await ledgerLog(m.accountId, 'live');
      expect(reservationsOf(log, 'funds_reserved', 'payout').map((e) => e.reservation!.id)).toEqual([`po_${created.body.id}`]);
      expect(refusalsOf(log, 'payout')).toEqual(Array(19).fill('duplicate_request'));
      const expected = { available: '850.00', pending: '0.00', reserved: '150.00' };
      expect(merchantPart(await liveBalance(m.accountId, 'live'))).toEqual(expected);
      await waitForBalance(m.live, expected);
    });
  });

  // ---------------------------------------------------------------------------------

  describe('refunds and payouts racing for one balance', () => {
    it('15 refunds and 15 payouts at once, then settled: the read model equals the ledger, the balance equals paid − settled, ledger:verify passes', async () => {
      // One live account: a project that releases at once (3 × 1000.00 available, the
      // invoices to refund) and one that holds (700.00 pending).
      const held = await opA.merchant({ holdHours: 24 });
      const m = await instantMerchant(opA, held.accountId);
      const invoices: string[] = [];
      for (let i = 0; i < 3; i++) invoices.push(await paidInvoice(opA, m.live, '1000.00'));
      const heldInvoice = await paidInvoice(opA, held.live, '700.00');
      await waitForBalance(m.live, { available: '3000.00', pending: '700.00', reserved: '0.00' });
      const addressId = (await payoutAddress(opA, m.accountId, { method: 'sbp', account: PHONE })).id as number;
      let paidNet = 0;
      for (const id of [...invoices, heldInvoice]) {
        paidNet += (await invoiceEvents(id)).find((e) => e.type === 'InvoicePaid')!.data.netAmount as number;
      }
      expect(paidNet).toBe(370_000);

      // 15 refunds of 150.00 (5 per invoice: the invoices never limit them) and 15 payouts
      // of 300.00 with orderIds, interleaved, over both processes. Wanted: 2250 + 3 × 300
      // = 3150 > 3000, so the balance refuses something; at least two payouts always fit
      // (refunds take 2250 at most) and at least 14 refunds (payouts take 900 at most).
      const clients = clientsOf(m, 'live');
      const payoutOrders = Array.from({ length: 15 }, () => orderId('mix'));
      // Refund i goes to process i % 2 and payout i to the other one, so each process gets both kinds.
      const requests = Array.from({ length: 30 }, (_, k) => {
        const i = Math.floor(k / 2);
        return k % 2 === 0
          ? refund(clients[i % 2]!, invoices[i % 3]!, '150.00').then((reply) => ({ kind: 'refund' as const, i, reply }))
          : clients[(i + 1) % 2]!.post('/v1/payouts', { amount: '300.00', addressId, orderId: payoutOrders[i] }).then((reply) => ({
              kind: 'payout' as const,
              i,
              reply,
            }));
      });
      const results = await Promise.all(requests);
      const refundReplies = results.filter((x) => x.kind === 'refund');
      const payoutReplies = results.filter((x) => x.kind === 'payout');

      for (const { reply } of refundReplies) expect(['202', '422 insufficient_balance']).toContain(Object.keys(tally([reply]))[0]);
      for (const { reply } of payoutReplies) expect(['201', '409 too_many_pending', '422 insufficient_balance']).toContain(Object.keys(tally([reply]))[0]);
      const acceptedRefunds = refundReplies.filter((x) => x.reply.status === 202);
      const createdPayouts = payoutReplies.filter((x) => x.reply.status === 201);
      for (const { i, reply } of acceptedRefunds) expectRefundAccepted(reply, invoices[i % 3]!, '150.00');
      for (const { reply } of createdPayouts) expectPayoutCreated(reply, '300.00');
      for (const { reply } of [...refundReplies, ...payoutReplies].filter((x) => x.reply.status >= 400)) {
        if (reply.body.error.code === 'too_many_pending') expectError(reply, 409, 'too_many_pending');
        else expectError(reply, 422, 'insufficient_balance');
      }
      const R = acceptedRefunds.length;
      const P = createdPayouts.length;
      const refusedForBalance = [...refundReplies, ...payoutReplies].filter((x) => x.reply.body?.error?.code === 'insufficient_balance').length;
      const tooMany = payoutReplies.filter((x) => x.reply.body?.error?.code === 'too_many_pending').length;
      expect(R).toBeGreaterThanOrEqual(14);
      expect(P).toBeGreaterThanOrEqual(2);
      expect(P).toBeLessThanOrEqual(3);
      expect(refusedForBalance).toBeGreaterThanOrEqual(1);
      expect(R + P + refusedForBalance + tooMany).toBe(30);
      const reservedKopecks = R * 15_000 + P * 30_000;
      expect(reservedKopecks).toBeLessThanOrEqual(300_000);
      // Nothing was refused that would have fitted: what is left is below the smallest refused request.
      const left = 300_000 - reservedKopecks;
      if (refundReplies.some((x) => x.reply.status === 422)) expect(left).toBeLessThan(15_000);
      if (payoutReplies.some((x) => x.reply.status === 422)) expect(left).toBeLessThan(30_000);
      // too_many_pending only ever with three unfinished payouts.
      if (tooMany > 0) expect(P).toBe(3);

      // What the clients were told is what the log says.
      const burstLog = await ledgerLog(m.accountId, 'live');
      expect(
        reservationsOf(burstLog, 'funds_reserved', 'refund')
          .map((e) => e.reservation!.id)
          .sort(),
      ).toEqual(acceptedRefunds.map((x) => x.reply.body.id).sort());
      expect(
        reservationsOf(burstLog, 'funds_reserved', 'payout')
          .map((e) => e.reservation!.id)
          .sort(),
      ).toEqual(createdPayouts.map((x) => `po_${x.reply.body.id}`).sort());
      expect([...refusalsOf(burstLog, 'refund'), ...refusalsOf(burstLog, 'payout')].sort()).toEqual(
        [...refundReplies, ...payoutReplies]
          .filter((x) => x.reply.status >= 400)
          .map((x) => x.reply.body.error.code)
          .sort(),
      );
      expect(lowestEver(burstLog)).toEqual({ available: 0, pending: 0, reserved: 0 });
      const afterBurst = { available: fromKopecks(left), pending: '700.00', reserved: fromKopecks(reservedKopecks) };
      expect(merchantPart(await liveBalance(m.accountId, 'live'))).toEqual(afterBurst);
      await waitForBalance(m.live, afterBurst);

      // Settle some, over both processes: the first payout paid, the second rejected, a
      // third (if any) left pending; three refunds failed by the bank, the rest succeed.
      const [paidPayout, rejectedPayout, openPayout] = createdPayouts.map((x) => x.reply.body.id as number);
      for (const [step, op] of [
        ['approve', opA],
        ['process', opB],
        ['pay', opA],
      ] as const) {
        const r = await transition(op, paidPayout!, step, step === 'pay' ? { externalId: 'bank-tx-1' } : undefined);
        expectStatus(r, 200);
      }
      const rejected = await transition(opB, rejectedPayout!, 'reject', { reason: 'Реквизит заблокирован банком' });
      expectStatus(rejected, 200);
      expect(rejected.body.status).toBe('rejected');
      if (openPayout !== undefined) expectStatus(await transition(opA, openPayout, 'approve'), 200);

      const failedRefunds = acceptedRefunds.slice(0, 3);
      for (const [n, { reply }] of failedRefunds.entries()) {
        const r = await (n % 2 === 0 ? opA : opB).http.post(`/admin/v1/refunds/${reply.body.id}/fail`, { reason: 'Банк отклонил возврат' });
        expectStatus(r, 200);
        expect(r.body.status).toBe('failed');
      }
      await advanceBoth(REFUND_PROCESSING_SECONDS + 1);

      // Each invoice: refunded exactly what its succeeded refunds took.
      const succeeded = acceptedRefunds.slice(3);
      for (const [k, invoiceId] of invoices.entries()) {
        const count = succeeded.filter((x) => x.i % 3 === k).length;
        await waitForRefunded(m.live, invoiceId, fromKopecks(count * 15_000), count > 0 ? 'partially_refunded' : 'paid');
      }
      for (const { reply } of succeeded) {
        const r = await m.live.get(`/v1/refunds/${reply.body.id}`);
        expectStatus(r, 200);
        expect(r.body.status).toBe('succeeded');
      }
      for (const { reply } of failedRefunds) {
        const r = await m.live.get(`/v1/refunds/${reply.body.id}`);
        expectStatus(r, 200);
        expect(r.body.status).toBe('failed');
      }

      const settledRefunds = succeeded.length * 15_000;
      const settledPayouts = 30_000;
      const stillReserved = openPayout === undefined ? 0 : 30_000;
      const expected: Balance = {
        available: fromKopecks(paidNet - 70_000 - settledRefunds - settledPayouts - stillReserved),
        pending: '700.00',
        reserved: fromKopecks(stillReserved),
      };
      const ledger = await waitForLedger(m.accountId, 'live', expected);
      expect(ledger.system.refunds_paid).toBe(fromKopecks(settledRefunds));
      expect(ledger.system.payouts_sent).toBe('297.00');

      // The read model catches up with the ledger rebuilt from the log, field by field.
      const readModel = await poll(
        () => balanceOf(clients[1]),
        (b) => b.available === ledger.available && b.pending === ledger.pending && b.reserved === ledger.reserved,
        'GET /v1/balance to equal the ledger',
        15_000,
      );
      expect(merchantPart(readModel)).toEqual(merchantPart(await liveBalance(m.accountId, 'live')));
      for (const v of Object.values(merchantPart(readModel))) expect(v).toMatch(MONEY);
      // available + reserved + pending = paid net − settled refunds − settled payouts.
      expect(toKopecks(readModel.available) + toKopecks(readModel.reserved) + toKopecks(readModel.pending)).toBe(paidNet - settledRefunds - settledPayouts);

      const finalLog = await ledgerLog(m.accountId, 'live');
      expect(reservationsOf(finalLog, 'reservation_settled', 'refund')).toHaveLength(succeeded.length);
      expect(
        reservationsOf(finalLog, 'reservation_released', 'refund')
          .map((e) => e.reservation!.id)
          .sort(),
      ).toEqual(failedRefunds.map((x) => x.reply.body.id).sort());
      expect(reservationsOf(finalLog, 'reservation_settled', 'payout').map((e) => e.reservation!.id)).toEqual([`po_${paidPayout}`]);
      expect(reservationsOf(finalLog, 'reservation_released', 'payout').map((e) => e.reservation!.id)).toEqual([`po_${rejectedPayout}`]);
      expect(lowestEver(finalLog)).toEqual({ available: 0, pending: 0, reserved: 0 });
      // The journal of the read model holds every entry of the log, in the log's order (refusals too, without postings).
      const projected = await poll(
        () => journal(m.accountId, 'live'),
        (items) => items.length >= finalLog.length,
        'the journal read model to hold every entry of the log',
      );
      expect(projected.map((e) => [e.entryId, e.kind, e.cause, e.postings.length])).toEqual(
        finalLog.map((e) => [e.entryId, e.kind, e.cause, e.postings.length]),
      );

      // Every ledger of the database, replayed from the log, agrees with the read model.
      const verify = startProcess('ledger-verify', { DATABASE_URL: db.url });
      const code = await verify.exited;
      if (code !== 0) throw new Error(`ledger:verify exited ${code}:\n${verify.output()}`);
      expect(verify.output()).toContain('OK: every entry balances');
    });
  });
});
