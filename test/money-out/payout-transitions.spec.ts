/**
 * The operator's payout transitions over HTTP: from every status a payout can reach
 * (pending, approved, processing, paid, rejected, cancelled) each of the five
 * transitions (approve, process, pay, reject, cancel) is either legal (200, the new
 * status) or 409 conflict; unknown payouts and missing reasons; the fields set on the
 * way (statusReason, externalId, processedAt); and the money: paid settles the
 * reservation (payouts_sent the net, fees the fee), rejected and cancelled return it
 * to available, with GET /admin/v1/accounts/{id}/balance and GET /v1/balance agreeing.
 */
import { expectError, expectStatus, InvoiceGateway, ISO_UTC, Json, Merchant, orderId, poll, startInvoiceGateway } from '../support/merchant-fixtures';
import { fund, instantMerchant, PHONE, payoutAddress, transition, waitForBalance } from '../support/money-out-fixtures';

type Status = 'pending' | 'approved' | 'processing' | 'paid' | 'rejected' | 'cancelled';
type Transition = 'approve' | 'process' | 'pay' | 'reject' | 'cancel';

const STATUSES: readonly Status[] = ['pending', 'approved', 'processing', 'paid', 'rejected', 'cancelled'];
const TRANSITIONS: readonly Transition[] = ['approve', 'process', 'pay', 'reject', 'cancel'];

/** The legal transitions and where they lead; every other pair is 409 conflict. */
const LEGAL: Readonly<Record<Status, Partial<Record<Transition, Status>>>> = {
  pending: { approve: 'approved', reject: 'rejected', cancel: 'cancelled' },
  approved: { process: 'processing', reject: 'rejected' },
  processing: { pay: 'paid', reject: 'rejected' },
  paid: {},
  rejected: {},
  cancelled: {},
};

/** How a pending payout reaches each status. */
const PATH: Readonly<Record<Status, readonly Transition[]>> = {
  pending: [],
  approved: ['approve'],
  processing: ['approve', 'process'],
  paid: ['approve', 'process', 'pay'],
  rejected: ['reject'],
  cancelled: ['cancel'],
};

/** A body every transition accepts (reject and cancel need a reason). */
const bodyOf = (t: Transition): Json =>
  t === 'reject' || t === 'cancel' ? { reason: `Причина: ${t}` } : t === 'pay' ? { externalId: `ext-${t}-${Date.now()}` } : undefined;

/** Each merchant is funded with 1000.00 and pays out 400.00 by SBP: fee 4.00, net 396.00. */
const FUNDED = '1000.00';
const AMOUNT = '400.00';
const FEE = '4.00';
const NET = '396.00';
const LEFT = '600.00';

describe('payout transitions (operator API, CLOCK=manual)', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    // CLOCK=manual: the tests read the gateway's time through the operator's clock (advance 0).
    gw = await startInvoiceGateway({ CLOCK: 'manual' });
  });
  afterAll(async () => {
    await gw?.close();
  });

  const adminBalance = async (m: Merchant): Promise<Json> => {
    const r = await gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=live`);
    expectStatus(r, 200);
    return r.body;
  };

  /** The live journal of the account, all pages. */
  const journal = async (m: Merchant): Promise<Json[]> => {
    const items: Json[] = [];
    let cursor: string | null = null;
    do {
      const r: Json = await gw.operator.http.get(
        `/admin/v1/accounts/${m.accountId}/ledger?mode=live&limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expectStatus(r, 200);
      items.push(...r.body.items);
      cursor = r.body.nextCursor;
    } while (cursor);
    return items;
  };
  const entryOf = (m: Merchant, cause: string): Promise<Json> =>
    poll(
      async () => (await journal(m)).find((e) => e.cause === cause),
      (e) => e !== undefined,
      `journal entry ${cause}`,
    );

  /**
   * Waits until the ledger (from the event log) shows these balances, then until
   * GET /v1/balance (the read model) says the same: both agree.
   */
  const expectBalances = async (m: Merchant, expected: { available: string; reserved: string }): Promise<Json> => {
    const ledger = await poll(
      () => adminBalance(m),
      (b) => b.available === expected.available && b.reserved === expected.reserved,
      `ledger ${JSON.stringify(expected)}`,
    );
    expect(ledger).toMatchObject({ ...expected, pending: '0.00', currency: 'RUB' });
    const merchant = await waitForBalance(m.live, { ...expected, pending: '0.00' });
    expect(merchant).toEqual({ available: ledger.available, pending: ledger.pending, reserved: ledger.reserved, currency: 'RUB' });
    return ledger;
  };

  /** A fresh funded merchant with a pending 400.00 SBP payout. */
  const pendingPayout = async (): Promise<{ m: Merchant; payout: Json }> => {
    const m = await instantMerchant(gw.operator);
    await fund(gw.operator, m, 'live', [FUNDED]);
    const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк' });
    const r = await m.live.post('/v1/payouts', { amount: AMOUNT, addressId: address.id, orderId: orderId('tr') });
    expectStatus(r, 201);
    expect(r.body).toMatchObject({ status: 'pending', amount: AMOUNT, feeAmount: FEE, netAmount: NET });
    return { m, payout: r.body };
  };

  /** A fresh payout brought to `status` along the legal path. */
  const payoutIn = async (status: Status): Promise<{ m: Merchant; payout: Json }> => {
    const { m, payout } = await pendingPayout();
    let current = payout;
    for (const t of PATH[status]) {
      const r = await transition(gw.operator, payout.id, t, bodyOf(t));
      expectStatus(r, 200);
      current = r.body;
    }
    expect(current.status).toBe(status);
    return { m, payout: current };
  };

  /** The balances a payout in `status` leaves (funded 1000.00, payout 400.00). */
  const balancesIn = (status: Status) =>
    status === 'paid'
      ? { available: LEFT, reserved: '0.00' }
      : status === 'rejected' || status === 'cancelled'
        ? { available: FUNDED, reserved: '0.00' }
        : { available: LEFT, reserved: AMOUNT };

  describe.each(STATUSES)('from %s', (status) => {
    const legal = Object.entries(LEGAL[status]) as [Transition, Status][];
    const illegal = TRANSITIONS.filter((t) => LEGAL[status][t] === undefined);

    it(`illegal (${illegal.join(', ') || 'none'}): 409 conflict, nothing changes`, async () => {
      const { m, payout } = await payoutIn(status);
      const ledgerBefore = await expectBalances(m, balancesIn(status));
      for (const t of illegal) {
        expectError(await transition(gw.operator, payout.id, t, bodyOf(t)), 409, 'conflict');
        // Without a body too (reject and cancel then fail on their reason first).
        if (t !== 'reject' && t !== 'cancel') expectError(await transition(gw.operator, payout.id, t), 409, 'conflict');
      }
      const got = await m.live.get(`/v1/payouts/${payout.id}`);
      expectStatus(got, 200);
      expect(got.body).toEqual(payout);
      const ledgerAfter = await adminBalance(m);
      expect({ ...ledgerAfter, asOf: null }).toEqual({ ...ledgerBefore, asOf: null });
    });

    if (legal.length > 0) {
      it.each(legal)(`%s → 200, status %s`, async (t, to) => {
        const { m, payout } = await payoutIn(status);
        const body = bodyOf(t);
        const before = await gw.operator.advance(0);
        const r = await transition(gw.operator, payout.id, t, body);
        const after = await gw.operator.advance(0);
        expectStatus(r, 200);
        const final = to === 'paid' || to === 'rejected' || to === 'cancelled';
        expect(r.body).toEqual({
          ...payout,
          status: to,
          statusReason: to === 'rejected' || to === 'cancelled' ? body.reason : null,
          externalId: to === 'paid' ? body.externalId : null,
          processedAt: final ? expect.stringMatching(ISO_UTC) : null,
        });
        if (final) {
          expect(Date.parse(r.body.processedAt)).toBeGreaterThanOrEqual(before.getTime());
          expect(Date.parse(r.body.processedAt)).toBeLessThanOrEqual(after.getTime());
        }
        const got = await m.live.get(`/v1/payouts/${payout.id}`);
        expectStatus(got, 200);
        expect(got.body).toEqual(r.body);
        await expectBalances(m, balancesIn(to));
        // The same transition again is no longer legal (every status changes by it).
        expectError(await transition(gw.operator, payout.id, t, body), 409, 'conflict');
      });
    }
  });

  describe('the fields and the money of each outcome', () => {
    it('paid: externalId set, reserved down by the amount, available unchanged; the journal settles net to payouts_sent and the fee to fees', async () => {
      const { m, payout } = await payoutIn('processing');
      const reservedEntry = await entryOf(m, `reserve:po_${payout.id}`);
      expect(reservedEntry.kind).toBe('funds_reserved');
      expect(reservedEntry.postings).toEqual(
        expect.arrayContaining([
          { account: 'available', amount: `-${AMOUNT}` },
          { account: 'reserved', amount: AMOUNT },
        ]),
      );
      const before = await expectBalances(m, { available: LEFT, reserved: AMOUNT });

      const r = await transition(gw.operator, payout.id, 'pay', { externalId: '0xabc123-перевод-42' });
      expectStatus(r, 200);
      expect(r.body).toMatchObject({ status: 'paid', externalId: '0xabc123-перевод-42', statusReason: null });
      expect(r.body.processedAt).toMatch(ISO_UTC);

      const after = await expectBalances(m, { available: LEFT, reserved: '0.00' });
      expect(after.system.payouts_sent).toBe(NET);
      expect(Number(after.system.fees) - Number(before.system.fees)).toBeCloseTo(Number(FEE), 2);
      expect(before.system.payouts_sent).toBe('0.00');

      const settled = await entryOf(m, `settle:po_${payout.id}`);
      expect(settled.kind).toBe('reservation_settled');
      expect(settled.postings).toHaveLength(3);
      expect(settled.postings).toEqual(
        expect.arrayContaining([
          { account: 'reserved', amount: `-${AMOUNT}` },
          { account: 'payouts_sent', amount: NET },
          { account: 'fees', amount: FEE },
        ]),
      );
      expect((await journal(m)).filter((e) => e.cause === `release:po_${payout.id}`)).toEqual([]);
    });

    it('pay without externalId: externalId null', async () => {
      const { m, payout } = await payoutIn('processing');
      const r = await transition(gw.operator, payout.id, 'pay');
      expectStatus(r, 200);
      expect(r.body).toMatchObject({ status: 'paid', externalId: null, statusReason: null });
      expect(r.body.processedAt).toMatch(ISO_UTC);
      await expectBalances(m, { available: LEFT, reserved: '0.00' });
    });

    it.each<[Status, Transition]>([
      ['pending', 'reject'],
      ['approved', 'reject'],
      ['processing', 'reject'],
      ['pending', 'cancel'],
    ])('from %s, %s: statusReason and processedAt set, the amount back to available (reservation_released)', async (from, t) => {
      const { m, payout } = await payoutIn(from);
      await expectBalances(m, { available: LEFT, reserved: AMOUNT });
      const reason = `Оператор: ${t} из ${from}`;
      const r = await transition(gw.operator, payout.id, t, { reason });
      expectStatus(r, 200);
      expect(r.body).toMatchObject({ status: t === 'reject' ? 'rejected' : 'cancelled', statusReason: reason, externalId: null });
      expect(r.body.processedAt).toMatch(ISO_UTC);

      const after = await expectBalances(m, { available: FUNDED, reserved: '0.00' });
      expect(after.system.payouts_sent).toBe('0.00');
      const released = await entryOf(m, `release:po_${payout.id}`);
      expect(released.kind).toBe('reservation_released');
      expect(released.postings).toHaveLength(2);
      expect(released.postings).toEqual(
        expect.arrayContaining([
          { account: 'reserved', amount: `-${AMOUNT}` },
          { account: 'available', amount: AMOUNT },
        ]),
      );
      expect((await journal(m)).filter((e) => e.cause === `settle:po_${payout.id}`)).toEqual([]);

      // The released money can be paid out again.
      const again = await m.live.post('/v1/payouts', { amount: FUNDED, addressId: payout.addressId, orderId: orderId('again') });
      expectStatus(again, 201);
      await expectBalances(m, { available: '0.00', reserved: FUNDED });
    });

    it('approve and process keep the money reserved and set no processedAt', async () => {
      const { m, payout } = await pendingPayout();
      const approved = await transition(gw.operator, payout.id, 'approve');
      expectStatus(approved, 200);
      expect(approved.body).toMatchObject({ status: 'approved', processedAt: null, statusReason: null, externalId: null });
      await expectBalances(m, { available: LEFT, reserved: AMOUNT });
      const processing = await transition(gw.operator, payout.id, 'process', {});
      expectStatus(processing, 200);
      expect(processing.body).toMatchObject({ status: 'processing', processedAt: null, statusReason: null, externalId: null });
      await expectBalances(m, { available: LEFT, reserved: AMOUNT });
    });
  });

  describe('errors', () => {
    it.each(TRANSITIONS.map((t) => [t]))('%s of an unknown payout: 404 not_found', async (t) => {
      for (const id of ['999999999', 'abc', '0', '-1', '1.5']) {
        expectError(await transition(gw.operator, id as unknown as number, t, bodyOf(t)), 404, 'not_found');
      }
    });

    it('an unknown transition: 404 not_found', async () => {
      const { payout } = await pendingPayout();
      expectError(await transition(gw.operator, payout.id, 'refund'), 404, 'not_found');
    });

    it.each<[Transition, string, Json]>([
      ['reject', 'no body', undefined],
      ['reject', '{}', {}],
      ['reject', 'an empty reason', { reason: '' }],
      ['reject', 'reason null', { reason: null }],
      ['reject', 'reason 42', { reason: 42 }],
      ['cancel', 'no body', undefined],
      ['cancel', '{}', {}],
      ['cancel', 'an empty reason', { reason: '' }],
      ['cancel', 'a reason over 500 characters', { reason: 'x'.repeat(501) }],
    ])('%s with %s: 400 validation, param reason; the payout stays pending', async (t, _what, body) => {
      const { m, payout } = await pendingPayout();
      expectError(await transition(gw.operator, payout.id, t, body), 400, 'validation', 'reason');
      const got = await m.live.get(`/v1/payouts/${payout.id}`);
      expectStatus(got, 200);
      expect(got.body).toEqual(payout);
      await expectBalances(m, { available: LEFT, reserved: AMOUNT });
    });

    it('unknown fields in a transition body: 400 validation', async () => {
      const { payout } = await pendingPayout();
      expectError(await transition(gw.operator, payout.id, 'approve', { note: 'x' }), 400, 'validation', 'note');
      expectError(await transition(gw.operator, payout.id, 'pay', { externalId: 5 }), 400, 'validation', 'externalId');
    });

    it('the operator API needs the admin token', async () => {
      const { m, payout } = await pendingPayout();
      expectError(await m.live.post(`/admin/v1/payouts/${payout.id}/approve`), 401, 'unauthorized');
      const got = await m.live.get(`/v1/payouts/${payout.id}`);
      expect(got.body.status).toBe('pending');
    });
  });
});
