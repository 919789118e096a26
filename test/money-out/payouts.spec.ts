/**
 * Payouts end to end over HTTP: payout details (operator API, GET /v1/payout-addresses),
 * POST /v1/payouts with every rule and error code (test mode, details, minimum,
 * balance, validation, orderId idempotency, duplicates within a minute, at most three
 * unfinished), GET /v1/payouts (order, filter, pages, orderId) and GET /v1/payouts/{id}
 * (visibility, poll limit), and the USDT amount at the configured rate.
 *
 * The main gateway runs with CLOCK=manual: the tests of one file share its clock, and
 * the duplicate-window test advances it (nothing else here depends on time).
 */
import { randomUUID } from 'node:crypto';
import { PAYOUT_STATUSES } from '#domain';
import {
  api,
  expectError,
  expectStatus,
  InvoiceGateway,
  ISO_UTC,
  Json,
  Merchant,
  Operator,
  orderId,
  poll,
  Reply,
  startInvoiceGateway,
} from '../support/merchant-fixtures';
import { BEP20, fromKopecks, fund, instantMerchant, PHONE, payoutAddress, toKopecks, transition, TRC20, waitForBalance } from '../support/money-out-fixtures';

/** The payout details as the merchant sees them (masked). */
const PHONE_MASKED = '+7916*****67';
const TRC20_MASKED = 'TQn9Y2****bLSE';
const BEP20_MASKED = '0x5290****9ee7';
const BEP20_CANONICAL = BEP20.toLowerCase();

const PAYOUT_FIELDS = [
  'id',
  'status',
  'amount',
  'feeAmount',
  'netAmount',
  'currency',
  'method',
  'account',
  'bank',
  'addressId',
  'orderId',
  'comment',
  'usdtAmount',
  'usdtRate',
  'statusReason',
  'externalId',
  'source',
  'createdAt',
  'processedAt',
].sort();

/** micro-USDT of a "d.dddddd" string and kopecks of a "d.dd" string, exactly. */
const micro = (usdt: string): bigint => {
  expect(usdt).toMatch(/^\d+\.\d{6}$/);
  return BigInt(usdt.replace('.', ''));
};
const kopecksOf = (money: string): bigint => BigInt(money.replace('.', ''));

/** usdtAmount is netAmount / usdtRate rounded down to a millionth: usdt·rate ≤ net < (usdt + 0.000001)·rate. */
function expectUsdtRoundedDown(payout: Json): void {
  const usdt = micro(payout.usdtAmount);
  const rate = kopecksOf(payout.usdtRate);
  const net = kopecksOf(payout.netAmount) * 1_000_000n;
  expect(usdt * rate <= net).toBe(true);
  expect(net < (usdt + 1n) * rate).toBe(true);
}

function expectIntegerId(payout: Json): void {
  expect(Number.isSafeInteger(payout.id)).toBe(true);
  expect(payout.id).toBeGreaterThan(0);
}

interface Helpers {
  operator: Operator;
  /** A merchant (holdHours 0) with the live balance funded by paid invoices. */
  fundedMerchant(amounts?: readonly string[]): Promise<Merchant>;
  adminBalance(accountId: string): Promise<Json>;
}

function helpersOf(gw: () => InvoiceGateway): Helpers {
  return {
    get operator() {
      return gw().operator;
    },
    async fundedMerchant(amounts = ['1000.00']) {
      const m = await instantMerchant(gw().operator);
      if (amounts.length > 0) await fund(gw().operator, m, 'live', amounts);
      return m;
    },
    async adminBalance(accountId) {
      const r = await gw().operator.http.get(`/admin/v1/accounts/${accountId}/balance?mode=live`);
      expectStatus(r, 200);
      return r.body;
    },
  };
}

describe('payouts over HTTP (CLOCK=manual)', () => {
  let gw: InvoiceGateway;
  const h = helpersOf(() => gw);

  beforeAll(async () => {
    gw = await startInvoiceGateway({
      CLOCK: 'manual',
      // Reads one invoice (or payout) several times in a row to follow its state; the poll rule has its own suite (rate-limits.spec.ts).
      POLL_INTERVAL_SECONDS: '0',
      // Sends more than 60 requests a second with one key; the rate limit has its own suite (rate-limits.spec.ts).
      RATE_LIMIT_PER_SECOND: '1000000',
    });
  });
  afterAll(async () => {
    await gw?.close();
  });

  const addAddress = (accountId: string, body: unknown) => gw.operator.http.post(`/admin/v1/accounts/${accountId}/payout-addresses`, body);
  const sbpAddress = (m: Merchant, confirm = true) =>
    payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк', label: 'Основная карта' }, confirm);
  const createPayout = async (m: Merchant, body: Record<string, unknown>): Promise<Json> => {
    const r = await m.live.post('/v1/payouts', body);
    expectStatus(r, 201);
    return r.body;
  };
  /** Waits until the ledger (read from the event log) shows `reserved`: the outcome workers caught up. */
  const waitForReserved = (m: Merchant, reserved: string) =>
    poll(
      () => h.adminBalance(m.accountId),
      (b) => b.reserved === reserved,
      `ledger reserved ${reserved}`,
    );
  /** Every page of GET /v1/payouts with the query. */
  const listAll = async (client: ReturnType<typeof api>, query: string, limit: number): Promise<{ items: Json[]; pages: Json[] }> => {
    const items: Json[] = [];
    const pages: Json[] = [];
    let cursor: string | null = null;
    do {
      const r: Reply = await client.get(`/v1/payouts?limit=${limit}${query ? `&${query}` : ''}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expectStatus(r, 200);
      pages.push(r.body);
      items.push(...r.body.items);
      cursor = r.body.nextCursor;
      expect(pages.length).toBeLessThan(50);
    } while (cursor);
    return { items, pages };
  };

  describe('payout details: operator API and GET /v1/payout-addresses', () => {
    it('adds a detail: 201 unconfirmed with the full canonical account; the same detail again (any spelling) → 200, the same id', async () => {
      const accountId = await gw.operator.createAccount();
      const before = await gw.operator.advance(0);
      const added = await addAddress(accountId, { method: 'sbp', account: '8 (916) 123-45-67', bank: 'Т-Банк', label: 'Зарплатная' });
      const after = await gw.operator.advance(0);
      expectStatus(added, 201);
      expect(added.body).toEqual({
        id: expect.any(Number),
        accountId,
        method: 'sbp',
        account: PHONE,
        bank: 'Т-Банк',
        label: 'Зарплатная',
        status: 'unconfirmed',
        confirmedAt: null,
        createdAt: expect.stringMatching(ISO_UTC),
      });
      expect(Number.isSafeInteger(added.body.id)).toBe(true);
      expect(Date.parse(added.body.createdAt)).toBeGreaterThanOrEqual(before.getTime());
      expect(Date.parse(added.body.createdAt)).toBeLessThanOrEqual(after.getTime());

      for (const spelling of [PHONE, '+7 916 123 45 67', '7-916-123-45-67']) {
        const again = await addAddress(accountId, { method: 'sbp', account: spelling, bank: 'Т-Банк', label: 'Зарплатная' });
        expectStatus(again, 200);
        expect(again.body).toEqual(added.body);
      }

      const bep = await addAddress(accountId, { method: 'usdt_bep20', account: BEP20 });
      expectStatus(bep, 201);
      expect(bep.body).toMatchObject({ method: 'usdt_bep20', account: BEP20_CANONICAL, bank: null, label: null, status: 'unconfirmed' });
      const bepUpper = await addAddress(accountId, { method: 'usdt_bep20', account: `0x${BEP20.slice(2).toUpperCase()}` });
      expectStatus(bepUpper, 200);
      expect(bepUpper.body.id).toBe(bep.body.id);

      const trc = await addAddress(accountId, { method: 'usdt_trc20', account: TRC20, label: 'Кошелёк' });
      expectStatus(trc, 201);
      expect(trc.body).toMatchObject({ method: 'usdt_trc20', account: TRC20, label: 'Кошелёк', status: 'unconfirmed' });
      expect(new Set([added.body.id, bep.body.id, trc.body.id]).size).toBe(3);

      // The same phone on another account is that account's own detail.
      const otherAccount = await gw.operator.createAccount();
      const elsewhere = await addAddress(otherAccount, { method: 'sbp', account: PHONE });
      expectStatus(elsewhere, 201);
      expect(elsewhere.body.id).not.toBe(added.body.id);
    });

    it('the same detail again with another bank or label: 409 conflict naming the way on, nothing changed', async () => {
      const accountId = await gw.operator.createAccount();
      const added = await addAddress(accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк', label: 'Основная' });
      expectStatus(added, 201);
      for (const other of [
        { bank: 'Т-Банк', label: 'Основная' },
        { bank: 'Сбербанк', label: 'Новая подпись' },
        { bank: 'Сбербанк' },
        { label: 'Основная' },
        { bank: null, label: null },
      ]) {
        const again = await addAddress(accountId, { method: 'sbp', account: '+7 916 123 45 67', ...other });
        expectError(again, 409, 'conflict');
        // The stored bank and label are named: the operator has no other route that reads them.
        expect(again.body.error.message).toMatch(/другим банком или подписью: bank "Сбербанк", label "Основная"; изменить их нельзя.*с этими bank и label/);
        expect(again.body.error.message).toContain(`id ${added.body.id}`);
      }
      const same = await addAddress(accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк', label: 'Основная' });
      expectStatus(same, 200);
      expect(same.body).toEqual(added.body);

      // Without bank and label, again without them: the same detail.
      const bare = await addAddress(accountId, { method: 'usdt_trc20', account: TRC20 });
      expectStatus(bare, 201);
      expectStatus(await addAddress(accountId, { method: 'usdt_trc20', account: TRC20, bank: null }), 200);
      expectError(await addAddress(accountId, { method: 'usdt_trc20', account: TRC20, label: 'Кошелёк' }), 409, 'conflict');
    });

    it.each([
      ['sbp', '12345'],
      ['sbp', '+1 916 123 45 67'],
      ['sbp', '+7916123456'],
      ['sbp', '+791612345678'],
      ['sbp', TRC20],
      ['usdt_trc20', 'T123'],
      ['usdt_trc20', `${TRC20.slice(0, -1)}0`],
      ['usdt_trc20', `A${TRC20.slice(1)}`],
      ['usdt_trc20', BEP20],
      ['usdt_trc20', PHONE],
      ['usdt_bep20', '0x123'],
      ['usdt_bep20', `${BEP20}a`],
      ['usdt_bep20', `0x${'g'.repeat(40)}`],
      ['usdt_bep20', BEP20.slice(2)],
      ['usdt_bep20', TRC20],
      ['usdt_bep20', ''],
    ])('%s with account %j: 400 validation, param account', async (method, account) => {
      const accountId = await gw.operator.createAccount();
      expectError(await addAddress(accountId, { method, account }), 400, 'validation', 'account');
    });

    it('a missing account or method, or an unknown method: 400 validation with its param', async () => {
      const accountId = await gw.operator.createAccount();
      expectError(await addAddress(accountId, { method: 'sbp' }), 400, 'validation', 'account');
      expectError(await addAddress(accountId, { account: PHONE }), 400, 'validation', 'method');
      expectError(await addAddress(accountId, { method: 'card', account: PHONE }), 400, 'validation', 'method');
      expectError(await addAddress(accountId, { method: 'sbp', account: 79161234567 }), 400, 'validation', 'account');
      expectError(await addAddress(accountId, { method: 'sbp', account: PHONE, extra: 1 }), 400, 'validation', 'extra');
    });

    it('an unknown account: 404', async () => {
      expectError(await addAddress(randomUUID(), { method: 'sbp', account: PHONE }), 404, 'not_found');
      expectError(await addAddress('not-an-account', { method: 'sbp', account: PHONE }), 404, 'not_found');
    });

    it('confirm → 200 confirmed with confirmedAt (again: 200, the same); an unknown detail → 404', async () => {
      const accountId = await gw.operator.createAccount();
      const added = await addAddress(accountId, { method: 'usdt_trc20', account: TRC20 });
      expectStatus(added, 201);
      const before = await gw.operator.advance(0);
      const confirmed = await gw.operator.http.post(`/admin/v1/payout-addresses/${added.body.id}/confirm`);
      const after = await gw.operator.advance(0);
      expectStatus(confirmed, 200);
      expect(confirmed.body).toEqual({ ...added.body, status: 'confirmed', confirmedAt: expect.stringMatching(ISO_UTC) });
      expect(Date.parse(confirmed.body.confirmedAt)).toBeGreaterThanOrEqual(before.getTime());
      expect(Date.parse(confirmed.body.confirmedAt)).toBeLessThanOrEqual(after.getTime());

      await gw.operator.advance(5);
      const again = await gw.operator.http.post(`/admin/v1/payout-addresses/${added.body.id}/confirm`);
      expectStatus(again, 200);
      expect(again.body).toEqual(confirmed.body);

      // Adding it again answers the confirmed detail.
      const readded = await addAddress(accountId, { method: 'usdt_trc20', account: TRC20 });
      expectStatus(readded, 200);
      expect(readded.body).toEqual(confirmed.body);

      for (const id of ['999999999', 'abc', '0', '-1', '1.5']) {
        expectError(await gw.operator.http.post(`/admin/v1/payout-addresses/${id}/confirm`), 404, 'not_found');
      }
    });

    it('GET /v1/payout-addresses: only the confirmed details of the key’s account, masked, with the spec’s fields', async () => {
      const m = await instantMerchant(gw.operator);
      const sbp = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк', label: 'Основная' });
      const trc = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_trc20', account: TRC20 });
      const bep = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_bep20', account: BEP20, label: 'BSC' }, false);
      // Another account with the very same phone, confirmed: never shown to m.
      const other = await instantMerchant(gw.operator);
      const foreign = await payoutAddress(gw.operator, other.accountId, { method: 'sbp', account: PHONE, label: 'Чужая' });

      const sbpItem = {
        id: sbp.id,
        method: 'sbp',
        label: 'Основная',
        account: PHONE_MASKED,
        bank: 'Сбербанк',
        status: 'confirmed',
        confirmedAt: sbp.confirmedAt,
        createdAt: sbp.createdAt,
      };
      const trcItem = {
        id: trc.id,
        method: 'usdt_trc20',
        label: null,
        account: TRC20_MASKED,
        bank: null,
        status: 'confirmed',
        confirmedAt: trc.confirmedAt,
        createdAt: trc.createdAt,
      };
      for (const client of [m.live, m.test]) {
        const r = await client.get('/v1/payout-addresses');
        expectStatus(r, 200);
        expect(r.body).toEqual({ items: [sbpItem, trcItem] });
      }

      // Once confirmed, the BEP-20 wallet shows too (masked from its canonical spelling).
      const bepConfirmed = await gw.operator.http.post(`/admin/v1/payout-addresses/${bep.id}/confirm`);
      expectStatus(bepConfirmed, 200);
      const r = await m.live.get('/v1/payout-addresses');
      expectStatus(r, 200);
      expect(r.body.items).toEqual([
        sbpItem,
        trcItem,
        {
          id: bep.id,
          method: 'usdt_bep20',
          label: 'BSC',
          account: BEP20_MASKED,
          bank: null,
          status: 'confirmed',
          confirmedAt: bepConfirmed.body.confirmedAt,
          createdAt: bep.createdAt,
        },
      ]);
      for (const item of r.body.items) {
        expect(Number.isSafeInteger(item.id)).toBe(true);
        expect(item.createdAt).toMatch(ISO_UTC);
        expect(item.confirmedAt).toMatch(ISO_UTC);
        expect(JSON.stringify(item)).not.toContain(PHONE);
        expect(JSON.stringify(item)).not.toContain(TRC20);
        expect(JSON.stringify(item).toLowerCase()).not.toContain(BEP20_CANONICAL);
      }

      // Details belong to the account: its other project sees them as well.
      const sibling = await gw.operator.merchant({ holdHours: 0 }, m.accountId);
      const siblingList = await sibling.live.get('/v1/payout-addresses');
      expectStatus(siblingList, 200);
      expect(siblingList.body).toEqual(r.body);

      // The other account sees only its own.
      const otherList = await other.live.get('/v1/payout-addresses');
      expectStatus(otherList, 200);
      expect(otherList.body.items.map((i: Json) => i.id)).toEqual([foreign.id]);

      // An account with no confirmed details: an empty list.
      const bare = await instantMerchant(gw.operator);
      await payoutAddress(gw.operator, bare.accountId, { method: 'sbp', account: PHONE }, false);
      const bareList = await bare.live.get('/v1/payout-addresses');
      expectStatus(bareList, 200);
      expect(bareList.body).toEqual({ items: [] });
    });

    it('GET /v1/payout-addresses without a valid key: 401', async () => {
      expectError(await api(gw.baseUrl).get('/v1/payout-addresses'), 401, 'unauthorized');
      expectError(await api(gw.baseUrl, `sk_live_${'x'.repeat(32)}`).get('/v1/payout-addresses'), 401, 'unauthorized');
    });
  });

  describe('POST /v1/payouts: created', () => {
    it('with addressId: 201 pending Payout (sbp 1.00 %), and the amount moves available → reserved at once', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      const oid = orderId('payout');
      const before = await gw.operator.advance(0);
      const r = await m.live.post('/v1/payouts', { amount: '500.00', addressId: address.id, orderId: oid, comment: 'Вывод за март' });
      const after = await gw.operator.advance(0);
      expectStatus(r, 201);
      expect(Object.keys(r.body).sort()).toEqual(PAYOUT_FIELDS);
      expect(r.body).toEqual({
        id: expect.any(Number),
        status: 'pending',
        amount: '500.00',
        feeAmount: '5.00',
        netAmount: '495.00',
        currency: 'RUB',
        method: 'sbp',
        account: PHONE_MASKED,
        bank: 'Сбербанк',
        addressId: address.id,
        orderId: oid,
        comment: 'Вывод за март',
        usdtAmount: null,
        usdtRate: null,
        statusReason: null,
        externalId: null,
        source: 'api',
        createdAt: expect.stringMatching(ISO_UTC),
        processedAt: null,
      });
      expectIntegerId(r.body);
      expect(Date.parse(r.body.createdAt)).toBeGreaterThanOrEqual(before.getTime());
      expect(Date.parse(r.body.createdAt)).toBeLessThanOrEqual(after.getTime());

      // The ledger reserved it before the answer; the read model follows.
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '500.00', pending: '0.00', reserved: '500.00' });
      await waitForBalance(m.live, { available: '500.00', pending: '0.00', reserved: '500.00' });

      const got = await m.live.get(`/v1/payouts/${r.body.id}`);
      expectStatus(got, 200);
      expect(got.body).toEqual(r.body);
    });

    it('an amount given as a number, the fee rounded half-up to the kopeck; no orderId or comment → null; exactly the minimum is accepted', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      // 1.00 % of 123.45 = 1.2345 → 1.23
      const odd = await createPayout(m, { amount: 123.45, addressId: address.id });
      expect(odd).toMatchObject({ status: 'pending', amount: '123.45', feeAmount: '1.23', netAmount: '122.22', orderId: null, comment: null });
      // 1.00 % of 150.50 = 1.505 → 1.51
      const half = await createPayout(m, { amount: '150.50', addressId: address.id, comment: null });
      expect(half).toMatchObject({ amount: '150.50', feeAmount: '1.51', netAmount: '148.99', comment: null });
      const minimum = await createPayout(m, { amount: '100.00', addressId: address.id, comment: 'x'.repeat(500), orderId: 'o'.repeat(128) });
      expect(minimum).toMatchObject({ amount: '100.00', feeAmount: '1.00', netAmount: '99.00', comment: 'x'.repeat(500), orderId: 'o'.repeat(128) });
      expect(new Set([odd.id, half.id, minimum.id]).size).toBe(3);
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '626.05', reserved: '373.95' });
      await waitForBalance(m.live, { available: '626.05', reserved: '373.95' });
    });

    it('the whole available balance can be paid out', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      const p = await createPayout(m, { amount: '1000.00', addressId: address.id });
      expect(p).toMatchObject({ amount: '1000.00', feeAmount: '10.00', netAmount: '990.00' });
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '0.00', reserved: '1000.00' });
    });

    it('with method + account spelled differently but canonically equal: the confirmed detail is used', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const sbp = await sbpAddress(m);
      const bep = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_bep20', account: BEP20 });
      const trc = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_trc20', account: TRC20 });

      const byPhone = await createPayout(m, { amount: '200.00', method: 'sbp', account: '+7 (916) 123-45-67' });
      expect(byPhone).toMatchObject({ method: 'sbp', account: PHONE_MASKED, bank: 'Сбербанк', addressId: sbp.id, feeAmount: '2.00', netAmount: '198.00' });
      expect(byPhone.usdtAmount).toBeNull();

      // 1.50 % of 300.00 = 4.50; 295.50 / 95.00 = 3.1105263… → 3.110526
      const byWallet = await createPayout(m, { amount: '300.00', method: 'usdt_bep20', account: `0x${BEP20.slice(2).toUpperCase()}` });
      expect(byWallet).toMatchObject({
        method: 'usdt_bep20',
        account: BEP20_MASKED,
        bank: null,
        addressId: bep.id,
        feeAmount: '4.50',
        netAmount: '295.50',
        usdtRate: '95.00',
        usdtAmount: '3.110526',
      });

      // addressId and a matching method + account together: the same detail.
      const both = await createPayout(m, { amount: '250.00', addressId: trc.id, method: 'usdt_trc20', account: ` ${TRC20} ` });
      expect(both).toMatchObject({ method: 'usdt_trc20', addressId: trc.id, account: TRC20_MASKED });
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '250.00', reserved: '750.00' });
    });

    it('USDT at the default rate 95.00: usdtAmount = netAmount / rate, rounded down to 6 decimals', async () => {
      const m = await h.fundedMerchant(['1000.00', '1000.00', '1000.00']);
      const trc = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_trc20', account: TRC20, label: 'TRON' });
      const bep = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_bep20', account: BEP20 });

      // 2.00 % of 500.00 = 10.00; 490.00 / 95.00 = 5.1578947… → 5.157894 (not 5.157895)
      const trcPayout = await createPayout(m, { amount: '500.00', addressId: trc.id });
      expect(trcPayout).toEqual(
        expect.objectContaining({
          status: 'pending',
          method: 'usdt_trc20',
          account: TRC20_MASKED,
          bank: null,
          addressId: trc.id,
          amount: '500.00',
          feeAmount: '10.00',
          netAmount: '490.00',
          usdtRate: '95.00',
          usdtAmount: '5.157894',
        }),
      );
      expectUsdtRoundedDown(trcPayout);

      // 1.50 % of 500.00 = 7.50; 492.50 / 95.00 = 5.1842105… → 5.184210
      const bepPayout = await createPayout(m, { amount: '500.00', addressId: bep.id });
      expect(bepPayout).toMatchObject({ method: 'usdt_bep20', feeAmount: '7.50', netAmount: '492.50', usdtRate: '95.00', usdtAmount: '5.184210' });
      expectUsdtRoundedDown(bepPayout);

      // 2.00 % of 1234.56 = 24.6912 → 24.69; 1209.87 / 95.00 = 12.7354736… → 12.735473
      const odd = await createPayout(m, { amount: '1234.56', addressId: trc.id });
      expect(odd).toMatchObject({ feeAmount: '24.69', netAmount: '1209.87', usdtRate: '95.00', usdtAmount: '12.735473' });
      expectUsdtRoundedDown(odd);

      const got = await m.live.get(`/v1/payouts/${odd.id}`);
      expectStatus(got, 200);
      expect(got.body).toEqual(odd);
    });
  });

  describe('POST /v1/payouts: refused', () => {
    let m: Merchant;
    let confirmed: Json;
    let unconfirmed: Json;
    let foreign: Json;

    beforeAll(async () => {
      m = await h.fundedMerchant(['1000.00']);
      confirmed = await sbpAddress(m);
      unconfirmed = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_trc20', account: TRC20 }, false);
      const other = await instantMerchant(gw.operator);
      foreign = await payoutAddress(gw.operator, other.accountId, { method: 'usdt_bep20', account: BEP20 });
    });

    /** Nothing was reserved by the refused requests. */
    const expectUntouched = async () => {
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '1000.00', pending: '0.00', reserved: '0.00' });
    };

    it('a test key: 403 test_mode, even for a valid body (and for any body)', async () => {
      expectError(await m.test.post('/v1/payouts', { amount: '100.00', addressId: confirmed.id }), 403, 'test_mode');
      expectError(await m.test.post('/v1/payouts', { amount: '100.00', addressId: confirmed.id, orderId: orderId() }), 403, 'test_mode');
      expectError(await m.test.post('/v1/payouts', {}), 403, 'test_mode');
      await expectUntouched();
    });

    it('an unknown detail, another account’s detail, or a method + account never added: 404 address_not_found', async () => {
      expectError(await m.live.post('/v1/payouts', { amount: '100.00', addressId: 999_999_999 }), 404, 'address_not_found', 'addressId');
      expectError(await m.live.post('/v1/payouts', { amount: '100.00', addressId: foreign.id }), 404, 'address_not_found', 'addressId');
      expectError(await m.live.post('/v1/payouts', { amount: '100.00', method: 'usdt_bep20', account: BEP20 }), 404, 'address_not_found', 'account');
      expectError(await m.live.post('/v1/payouts', { amount: '100.00', method: 'sbp', account: '+79990000000' }), 404, 'address_not_found', 'account');
      // A TRON address is case-sensitive: another spelling is another (unknown) wallet.
      const trcAgain = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_trc20', account: TRC20 }, false);
      expect(trcAgain.id).toBe(unconfirmed.id);
      expectError(
        await m.live.post('/v1/payouts', { amount: '100.00', method: 'usdt_trc20', account: TRC20.toLowerCase() }),
        404,
        'address_not_found',
        'account',
      );
      // The confirmed phone under another method is not that detail.
      expectError(await m.live.post('/v1/payouts', { amount: '100.00', method: 'usdt_trc20', account: PHONE }), 404, 'address_not_found', 'account');
      await expectUntouched();
    });

    it('an unconfirmed detail: 422 address_not_confirmed', async () => {
      expectError(await m.live.post('/v1/payouts', { amount: '100.00', addressId: unconfirmed.id }), 422, 'address_not_confirmed', 'addressId');
      expectError(await m.live.post('/v1/payouts', { amount: '100.00', method: 'usdt_trc20', account: TRC20 }), 422, 'address_not_confirmed', 'account');
      await expectUntouched();
    });

    it.each([['99.99'], ['0.00'], [0], [99.99], ['0.01']])('amount %j below the minimum 100.00: 422 amount_out_of_range', async (amount) => {
      expectError(await m.live.post('/v1/payouts', { amount, addressId: confirmed.id }), 422, 'amount_out_of_range', 'amount');
      await expectUntouched();
    });

    it('a USDT amount below its minimum: 422 amount_out_of_range', async () => {
      const usdt = await h.fundedMerchant(['1000.00']);
      const trc = await payoutAddress(gw.operator, usdt.accountId, { method: 'usdt_trc20', account: TRC20 });
      const bep = await payoutAddress(gw.operator, usdt.accountId, { method: 'usdt_bep20', account: BEP20 });
      expectError(await usdt.live.post('/v1/payouts', { amount: '99.99', addressId: trc.id }), 422, 'amount_out_of_range', 'amount');
      expectError(await usdt.live.post('/v1/payouts', { amount: '50.00', method: 'usdt_bep20', account: BEP20 }), 422, 'amount_out_of_range', 'amount');
      expect(bep.status).toBe('confirmed');
      expect(await h.adminBalance(usdt.accountId)).toMatchObject({ available: '1000.00', reserved: '0.00' });
    });

    it.each([['1000000000.01'], [1000000000.01], ['123456789012345678901234567890.00'], [1e20]])(
      'amount %j above the largest amount 1000000000.00: 422 amount_out_of_range, not 400 (and nothing reserved)',
      async (amount) => {
        const r = await m.live.post('/v1/payouts', { amount, addressId: confirmed.id });
        expectError(r, 422, 'amount_out_of_range', 'amount');
        expect(r.body.error.message).toBe('Сумма выплаты больше максимальной (1000000000.00 ₽)');
        await expectUntouched();
      },
    );

    it('above the available balance: 422 insufficient_balance (and nothing reserved)', async () => {
      expectError(await m.live.post('/v1/payouts', { amount: '1000.01', addressId: confirmed.id }), 422, 'insufficient_balance', 'amount');
      expectError(await m.live.post('/v1/payouts', { amount: '5000.00', addressId: confirmed.id, orderId: orderId() }), 422, 'insufficient_balance', 'amount');
      await expectUntouched();
      const empty = await instantMerchant(gw.operator);
      const address = await sbpAddress(empty);
      expectError(await empty.live.post('/v1/payouts', { amount: '100.00', addressId: address.id }), 422, 'insufficient_balance', 'amount');
      // Refused payouts are never shown.
      const list = await empty.live.get('/v1/payouts');
      expectStatus(list, 200);
      expect(list.body).toEqual({ items: [], nextCursor: null, hasMore: false });
    });

    const address = () => confirmed.id as number;
    it.each<[string, () => unknown, string]>([
      ['no amount', () => ({ addressId: address() }), 'amount'],
      ['amount null', () => ({ amount: null, addressId: address() }), 'amount'],
      ['amount as a boolean', () => ({ amount: true, addressId: address() }), 'amount'],
      ['amount with three decimals', () => ({ amount: '100.000', addressId: address() }), 'amount'],
      ['amount negative', () => ({ amount: '-100.00', addressId: address() }), 'amount'],
      ['amount not a number', () => ({ amount: 'сто', addressId: address() }), 'amount'],
      ['no addressId and no method + account', () => ({ amount: '100.00' }), 'addressId'],
      ['method without account', () => ({ amount: '100.00', method: 'sbp' }), 'account'],
      ['account without method', () => ({ amount: '100.00', account: PHONE }), 'method'],
      ['addressId with method but no account', () => ({ amount: '100.00', addressId: address(), method: 'sbp' }), 'account'],
      ['addressId as a string', () => ({ amount: '100.00', addressId: String(address()) }), 'addressId'],
      ['addressId fractional', () => ({ amount: '100.00', addressId: 1.5 }), 'addressId'],
      ['addressId zero', () => ({ amount: '100.00', addressId: 0 }), 'addressId'],
      ['addressId null', () => ({ amount: '100.00', addressId: null }), 'addressId'],
      ['an unknown method', () => ({ amount: '100.00', method: 'card', account: PHONE }), 'method'],
      ['account as a number', () => ({ amount: '100.00', method: 'sbp', account: 79161234567 }), 'account'],
      ['addressId and a different method + account', () => ({ amount: '100.00', addressId: address(), method: 'usdt_trc20', account: TRC20 }), 'account'],
      ['comment over 500 characters', () => ({ amount: '100.00', addressId: address(), comment: 'к'.repeat(501) }), 'comment'],
      ['comment as a number', () => ({ amount: '100.00', addressId: address(), comment: 42 }), 'comment'],
      ['orderId over 128 characters', () => ({ amount: '100.00', addressId: address(), orderId: 'o'.repeat(129) }), 'orderId'],
      ['orderId empty', () => ({ amount: '100.00', addressId: address(), orderId: '' }), 'orderId'],
      ['orderId as a number', () => ({ amount: '100.00', addressId: address(), orderId: 7 }), 'orderId'],
      ['an unknown field', () => ({ amount: '100.00', addressId: address(), currency: 'RUB' }), 'currency'],
      ['a body that is not an object', () => [{ amount: '100.00', addressId: address() }], 'body'],
    ])('%s: 400 validation', async (_what, body, param) => {
      expectError(await m.live.post('/v1/payouts', body()), 400, 'validation', param);
      await expectUntouched();
    });

    it('a body that is not JSON or is missing: 400 validation', async () => {
      const bad = await m.live.raw('POST', '/v1/payouts', {
        body: '{"amount": "100.00",',
        headers: { authorization: `Bearer ${m.keys.live.secretKey}`, 'content-type': 'application/json' },
      });
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('validation');
      const none = await m.live.post('/v1/payouts');
      expect(none.status).toBe(400);
      expect(none.body.error.code).toBe('validation');
      await expectUntouched();
    });

    it('without a valid key: 401 unauthorized', async () => {
      expectError(await api(gw.baseUrl).post('/v1/payouts', { amount: '100.00', addressId: confirmed.id }), 401, 'unauthorized');
      expectError(await api(gw.baseUrl, `sk_live_${'0'.repeat(40)}`).post('/v1/payouts', { amount: '100.00', addressId: confirmed.id }), 401, 'unauthorized');
      expectError(await api(gw.baseUrl, m.keys.live.publicKey).post('/v1/payouts', { amount: '100.00', addressId: confirmed.id }), 401, 'unauthorized');
      await expectUntouched();
    });
  });

  describe('orderId idempotency', () => {
    it('an orderId claimed by a request that died before writing its payout: the retry waits out the claim, and its payout is dated when it is decided', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      const oid = orderId('abandoned');
      // Read before the claim is made (its claimed_at is the database's now()): the claim runs out 5 s after it or later.
      const asked = await gw.operator.advance(0);
      await gw.db.pool.query(`INSERT INTO payout_order_ids (account_id, order_id, payout_id) VALUES ($1, $2, nextval('payout_ids'))`, [m.accountId, oid]);
      const r = await m.live.post('/v1/payouts', { amount: '100.00', addressId: address.id, orderId: oid });
      expectStatus(r, 201);
      // The claim is waited out (5 s from when it was claimed), then taken over. Dated with the request's arrival, its reservation would land
      // in a period a finance report already answered for (docs/finance-reports.md).
      expect(Date.parse(r.body.createdAt)).toBeGreaterThanOrEqual(asked.getTime() + 5_000);
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '900.00', reserved: '100.00' });
    }, 30_000);

    it('the same orderId again → 200 with the same payout, and no second reservation', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      const oid = orderId('idem');
      const first = await createPayout(m, { amount: '300.00', addressId: address.id, orderId: oid, comment: 'первая' });

      const again = await m.live.post('/v1/payouts', { amount: '300.00', addressId: address.id, orderId: oid, comment: 'первая' });
      expectStatus(again, 200);
      expect(again.body).toEqual(first);
      const byAccount = await m.live.post('/v1/payouts', { amount: '300.00', method: 'sbp', account: PHONE, orderId: oid });
      expectStatus(byAccount, 200);
      expect(byAccount.body).toEqual(first);
      // The orderId names the payout: a repeat with another amount and detail answers the first (docs/api.md).
      const otherBody = await m.live.post('/v1/payouts', { amount: '900.00', method: 'sbp', account: '+79990001122', orderId: oid });
      expectStatus(otherBody, 200);
      expect(otherBody.body).toEqual(first);

      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '700.00', reserved: '300.00' });
      await waitForBalance(m.live, { available: '700.00', reserved: '300.00' });

      const byOrder = await m.live.get(`/v1/payouts?orderId=${encodeURIComponent(oid)}`);
      expectStatus(byOrder, 200);
      expect(byOrder.body).toEqual(first);
      const list = await poll(
        () => m.live.get('/v1/payouts'),
        (r) => r.status === 200 && r.body.items.length > 0,
        'the payout in the list',
      );
      expect(list.body.items.map((p: Json) => p.id)).toEqual([first.id]);

      // The repeat after an operator transition answers the payout as it is now.
      expectStatus(await transition(gw.operator, first.id, 'approve'), 200);
      const later = await m.live.post('/v1/payouts', { amount: '300.00', addressId: address.id, orderId: oid });
      expectStatus(later, 200);
      expect(later.body).toEqual({ ...first, status: 'approved' });
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '700.00', reserved: '300.00' });
    });

    it('orderIds belong to the account: another account may use the same one', async () => {
      const a = await h.fundedMerchant(['1000.00']);
      const b = await h.fundedMerchant(['1000.00']);
      const oid = orderId('shared');
      const pa = await createPayout(a, { amount: '100.00', addressId: (await sbpAddress(a)).id, orderId: oid });
      const pb = await createPayout(b, { amount: '100.00', addressId: (await sbpAddress(b)).id, orderId: oid });
      expect(pb.id).not.toBe(pa.id);
      const got = await b.live.get(`/v1/payouts?orderId=${encodeURIComponent(oid)}`);
      expectStatus(got, 200);
      expect(got.body.id).toBe(pb.id);
    });

    it('an orderId refused for insufficient balance can be used again once the balance is funded', async () => {
      const m = await instantMerchant(gw.operator);
      const address = await sbpAddress(m);
      const oid = orderId('retry');
      const body = { amount: '500.00', addressId: address.id, orderId: oid };
      expectError(await m.live.post('/v1/payouts', body), 422, 'insufficient_balance', 'amount');
      expectError(await m.live.post('/v1/payouts', body), 422, 'insufficient_balance', 'amount');
      expectError(await m.live.get(`/v1/payouts?orderId=${encodeURIComponent(oid)}`), 404, 'not_found');

      await fund(gw.operator, m, 'live', ['1000.00']);
      const created = await m.live.post('/v1/payouts', body);
      expectStatus(created, 201);
      expect(created.body).toMatchObject({ status: 'pending', amount: '500.00', orderId: oid });
      const repeat = await m.live.post('/v1/payouts', body);
      expectStatus(repeat, 200);
      expect(repeat.body.id).toBe(created.body.id);
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '500.00', reserved: '500.00' });
    });
  });

  describe('concurrent requests', () => {
    it('the same orderId at once: one 201, the others 200 with the same payout, one reservation', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      const body = { amount: '250.00', addressId: address.id, orderId: orderId('race') };
      const replies = await Promise.all(Array.from({ length: 6 }, () => m.live.post('/v1/payouts', body)));
      expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 201]);
      expect(new Set(replies.map((r) => r.body.id)).size).toBe(1);
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '750.00', reserved: '250.00' });
    });

    it('the same amount and detail without orderId at once: one 201, the others 409 duplicate_request', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      const replies = await Promise.all(Array.from({ length: 4 }, () => m.live.post('/v1/payouts', { amount: '150.00', addressId: address.id })));
      expect(replies.filter((r) => r.status === 201)).toHaveLength(1);
      for (const r of replies.filter((x) => x.status !== 201)) expectError(r, 409, 'duplicate_request');
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '850.00', reserved: '150.00' });
    });

    it('six different payouts at once: three 201, three 409 too_many_pending', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      const replies = await Promise.all(
        ['100.00', '101.00', '102.00', '103.00', '104.00', '105.00'].map((amount) => m.live.post('/v1/payouts', { amount, addressId: address.id })),
      );
      const created = replies.filter((r) => r.status === 201);
      expect(created).toHaveLength(3);
      for (const r of replies.filter((x) => x.status !== 201)) expectError(r, 409, 'too_many_pending');
      const reserved = created.reduce((sum, r) => sum + toKopecks(r.body.amount), 0);
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: fromKopecks(100_000 - reserved), reserved: fromKopecks(reserved) });
    });

    it('payouts that together exceed the balance, at once: only what the balance covers is reserved', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      const replies = await Promise.all(
        ['400.00', '401.00', '402.00'].map((amount) => m.live.post('/v1/payouts', { amount, addressId: address.id, orderId: orderId('over') })),
      );
      const created = replies.filter((r) => r.status === 201);
      expect(created).toHaveLength(2);
      for (const r of replies.filter((x) => x.status !== 201)) expectError(r, 422, 'insufficient_balance', 'amount');
      const reserved = created.reduce((sum, r) => sum + toKopecks(r.body.amount), 0);
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: fromKopecks(100_000 - reserved), reserved: fromKopecks(reserved) });
    });
  });

  describe('duplicate_request', () => {
    it('the same amount and detail without orderId within 60 s → 409; after 61 s, with another amount or with an orderId → 201', async () => {
      const m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      const first = await createPayout(m, { amount: '100.00', addressId: address.id });

      expectError(await m.live.post('/v1/payouts', { amount: '100.00', addressId: address.id }), 409, 'duplicate_request');
      // The same detail named by method + account, the amount spelled as a number: still the same request.
      expectError(await m.live.post('/v1/payouts', { amount: 100, method: 'sbp', account: '8 916 123 45 67' }), 409, 'duplicate_request');

      const otherAmount = await createPayout(m, { amount: '100.01', addressId: address.id });
      const withOrderId = await createPayout(m, { amount: '100.00', addressId: address.id, orderId: orderId('dup') });
      expect(new Set([first.id, otherAmount.id, withOrderId.id]).size).toBe(3);
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '699.99', reserved: '300.01' });

      // Make room under the limit of three unfinished payouts.
      expectStatus(await transition(gw.operator, otherAmount.id, 'cancel', { reason: 'освобождаем место' }), 200);
      expectStatus(await transition(gw.operator, withOrderId.id, 'reject', { reason: 'освобождаем место' }), 200);
      await waitForReserved(m, '100.00');

      await gw.operator.advance(30);
      expectError(await m.live.post('/v1/payouts', { amount: '100.00', addressId: address.id }), 409, 'duplicate_request');
      await gw.operator.advance(31);
      const later = await createPayout(m, { amount: '100.00', addressId: address.id });
      expect(later.id).not.toBe(first.id);
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '800.00', reserved: '200.00' });
      await waitForBalance(m.live, { available: '800.00', reserved: '200.00' });
    });
  });

  describe('too_many_pending', () => {
    it('three unfinished payouts → the 4th is 409; once one is cancelled, rejected or paid a new one is accepted', async () => {
      const m = await h.fundedMerchant(['1000.00', '1000.00']);
      const address = await sbpAddress(m);
      const payout = (oid: string) => m.live.post('/v1/payouts', { amount: '100.00', addressId: address.id, orderId: oid });

      const p1 = await createPayout(m, { amount: '100.00', addressId: address.id, orderId: orderId('p1') });
      const p2 = await createPayout(m, { amount: '100.00', addressId: address.id, orderId: orderId('p2') });
      const p3 = await createPayout(m, { amount: '100.00', addressId: address.id, orderId: orderId('p3') });
      // approved and processing are unfinished too.
      expectStatus(await transition(gw.operator, p2.id, 'approve'), 200);
      expectStatus(await transition(gw.operator, p3.id, 'approve'), 200);
      expectStatus(await transition(gw.operator, p3.id, 'process'), 200);

      const o4 = orderId('p4');
      expectError(await payout(o4), 409, 'too_many_pending');
      // A repeat of an existing orderId is still answered with its payout.
      const repeat = await payout(p1.orderId);
      expectStatus(repeat, 200);
      expect(repeat.body.id).toBe(p1.id);
      // Also without orderId, and also when the balance would not cover it.
      expectError(await m.live.post('/v1/payouts', { amount: '123.00', addressId: address.id }), 409, 'too_many_pending');
      expectError(await m.live.post('/v1/payouts', { amount: '9000.00', addressId: address.id }), 409, 'too_many_pending');
      expect(await h.adminBalance(m.accountId)).toMatchObject({ available: '1700.00', reserved: '300.00' });

      // cancelled (pending): the slot and the money are free as soon as the operator's call answers.
      expectStatus(await transition(gw.operator, p1.id, 'cancel', { reason: 'передумал' }), 200);
      const p4 = await payout(o4);
      expectStatus(p4, 201);
      const o5 = orderId('p5');
      expectError(await payout(o5), 409, 'too_many_pending');

      // rejected (approved)
      expectStatus(await transition(gw.operator, p2.id, 'reject', { reason: 'реквизиты не прошли проверку' }), 200);
      expectStatus(await payout(o5), 201);
      const o6 = orderId('p6');
      expectError(await payout(o6), 409, 'too_many_pending');

      // paid (processing)
      expectStatus(await transition(gw.operator, p3.id, 'pay', { externalId: 'sbp-777' }), 200);
      expectStatus(await payout(o6), 201);
      expectError(await payout(orderId('p7')), 409, 'too_many_pending');

      // 2000 funded; p3 paid out (100.00); p4, p5, p6 reserved.
      const ledger = await h.adminBalance(m.accountId);
      expect(ledger).toMatchObject({ available: '1600.00', pending: '0.00', reserved: '300.00' });
      await waitForBalance(m.live, { available: '1600.00', pending: '0.00', reserved: '300.00' });
    });
  });

  describe('GET /v1/payouts', () => {
    let m: Merchant;
    let other: Merchant;
    let otherPayout: Json;
    /** Newest first once the list has caught up. */
    let expected: Json[];

    beforeAll(async () => {
      m = await h.fundedMerchant(['1000.00']);
      const address = await sbpAddress(m);
      const make = (amount: string) => createPayout(m, { amount, addressId: address.id, orderId: orderId('list') });
      const q1 = await make('100.00');
      expectStatus(await transition(gw.operator, q1.id, 'cancel', { reason: 'отмена' }), 200);
      const q2 = await make('101.00');
      expectStatus(await transition(gw.operator, q2.id, 'reject', { reason: 'отказ' }), 200);
      const q3 = await make('102.00');
      for (const t of ['approve', 'process', 'pay']) expectStatus(await transition(gw.operator, q3.id, t), 200);
      await waitForReserved(m, '0.00');
      const q4 = await make('103.00');
      const q5 = await make('104.00');
      expectStatus(await transition(gw.operator, q5.id, 'approve'), 200);

      other = await h.fundedMerchant(['1000.00']);
      otherPayout = await createPayout(other, { amount: '100.00', addressId: (await sbpAddress(other)).id, orderId: orderId('other') });

      expected = [];
      for (const q of [q5, q4, q3, q2, q1]) {
        const r = await m.live.get(`/v1/payouts/${q.id}`);
        expectStatus(r, 200);
        expected.push(r.body);
      }
      expect(expected.map((p) => p.status)).toEqual(['approved', 'pending', 'paid', 'rejected', 'cancelled']);
      await poll(
        () => m.live.get('/v1/payouts'),
        (r) => r.status === 200 && JSON.stringify(r.body.items) === JSON.stringify(expected),
        'the payout list to show the five payouts as they are',
      );
    });

    it('newest first, {items, nextCursor, hasMore}, the account’s own payouts only', async () => {
      const r = await m.live.get('/v1/payouts');
      expectStatus(r, 200);
      expect(r.body).toEqual({ items: expected, nextCursor: null, hasMore: false });
      expect(r.body.items.map((p: Json) => p.id)).not.toContain(otherPayout.id);
      for (const item of r.body.items) expect(Object.keys(item).sort()).toEqual(PAYOUT_FIELDS);
      const theirs = await poll(
        () => other.live.get('/v1/payouts'),
        (x) => x.status === 200 && x.body.items.length > 0,
        'the other account’s list',
      );
      expect(theirs.body.items.map((p: Json) => p.id)).toEqual([otherPayout.id]);
    });

    it.each([
      ['pending', [1]],
      ['approved', [0]],
      ['processing', []],
      ['paid', [2]],
      ['rejected', [3]],
      ['cancelled', [4]],
    ])('status=%s filters', async (status, indexes) => {
      const r = await m.live.get(`/v1/payouts?status=${status}`);
      expectStatus(r, 200);
      expect(r.body).toEqual({ items: (indexes as number[]).map((i) => expected[i]), nextCursor: null, hasMore: false });
    });

    it('limit and cursor: every page walked, each payout exactly once, in order', async () => {
      for (const limit of [1, 2, 3, 4, 5, 100]) {
        const { items, pages } = await listAll(m.live, '', limit);
        expect(items).toEqual(expected);
        expect(pages).toHaveLength(Math.ceil(expected.length / limit));
        pages.forEach((page, i) => {
          const last = i === pages.length - 1;
          expect(page.items.length).toBe(last ? expected.length - limit * i : limit);
          expect(page.hasMore).toBe(!last);
          if (last) expect(page.nextCursor).toBeNull();
          else expect(typeof page.nextCursor).toBe('string');
        });
      }
      // A filter and pages together.
      const finished = [...(await listAll(m.live, 'status=paid', 1)).items];
      expect(finished).toEqual([expected[2]]);
      const firstPage = await m.live.get('/v1/payouts?limit=2');
      const secondPage = await m.live.get(`/v1/payouts?limit=2&cursor=${encodeURIComponent(firstPage.body.nextCursor)}&status=cancelled`);
      expectStatus(secondPage, 200);
      expect(secondPage.body.items).toEqual([expected[4]]);
    });

    it('orderId → the one payout as an object; unknown or another account’s → 404 not_found', async () => {
      const r = await m.live.get(`/v1/payouts?orderId=${encodeURIComponent(expected[2].orderId)}`);
      expectStatus(r, 200);
      expect(r.body).toEqual(expected[2]);
      expectError(await m.live.get(`/v1/payouts?orderId=${encodeURIComponent(orderId('none'))}`), 404, 'not_found');
      expectError(await m.live.get(`/v1/payouts?orderId=${encodeURIComponent(otherPayout.orderId)}`), 404, 'not_found');
    });

    it('orderId with a status: the payout only in that status, else 404 (a pending payout is not answered to status=paid)', async () => {
      const { orderId: oid, status } = expected[2];
      const other = PAYOUT_STATUSES.find((s) => s !== status)!;
      const same = await m.live.get(`/v1/payouts?orderId=${encodeURIComponent(oid)}&status=${status}`);
      expectStatus(same, 200);
      expect(same.body).toEqual(expected[2]);
      expectError(await m.live.get(`/v1/payouts?orderId=${encodeURIComponent(oid)}&status=${other}`), 404, 'not_found');
    });

    it('a test key: an empty list, and 404 for an orderId', async () => {
      const r = await m.test.get('/v1/payouts');
      expectStatus(r, 200);
      expect(r.body).toEqual({ items: [], nextCursor: null, hasMore: false });
      const filtered = await m.test.get('/v1/payouts?status=pending&limit=5');
      expectStatus(filtered, 200);
      expect(filtered.body).toEqual({ items: [], nextCursor: null, hasMore: false });
      expectError(await m.test.get(`/v1/payouts?orderId=${encodeURIComponent(expected[0].orderId)}`), 404, 'not_found');
    });

    it.each([
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=abc', 'limit'],
      ['limit=-1', 'limit'],
      ['limit=1.5', 'limit'],
      ['status=refused', 'status'],
      ['status=requested', 'status'],
      ['status=PAID', 'status'],
      ['cursor=not-a-cursor%21', 'cursor'],
      [`cursor=${Buffer.from('"x"').toString('base64url')}`, 'cursor'],
      [`cursor=${Buffer.from('{"seq":"1"}').toString('base64url')}`, 'cursor'],
      [`orderId=${'o'.repeat(129)}`, 'orderId'],
      ['sort=asc', 'sort'],
    ])('GET /v1/payouts?%s: 400 validation', async (query, param) => {
      expectError(await m.live.get(`/v1/payouts?${query}`), 400, 'validation', param);
    });

    it('without a valid key: 401', async () => {
      expectError(await api(gw.baseUrl).get('/v1/payouts'), 401, 'unauthorized');
      expectError(await api(gw.baseUrl, `sk_live_${'1'.repeat(40)}`).get('/v1/payouts'), 401, 'unauthorized');
    });

    describe('GET /v1/payouts/{id}', () => {
      it('the account’s own payout', async () => {
        for (const p of expected) {
          const r = await m.live.get(`/v1/payouts/${p.id}`);
          expectStatus(r, 200);
          expect(r.body).toEqual(p);
        }
      });

      it('unknown, not an integer, another account’s, or with a test key: 404 not_found', async () => {
        for (const id of ['999999999', 'abc', '1.5', '0', '-1', `0${expected[0].id}`, '1e3', '99999999999999999999']) {
          expectError(await m.live.get(`/v1/payouts/${id}`), 404, 'not_found');
        }
        expectError(await m.live.get(`/v1/payouts/${otherPayout.id}`), 404, 'not_found');
        expectError(await other.live.get(`/v1/payouts/${expected[0].id}`), 404, 'not_found');
        expectError(await m.test.get(`/v1/payouts/${expected[0].id}`), 404, 'not_found');
      });

      it('without a valid key: 401', async () => {
        expectError(await api(gw.baseUrl).get(`/v1/payouts/${expected[0].id}`), 401, 'unauthorized');
      });
    });
  });
});

describe('payouts with USDT_RUB_RATE 92.50', () => {
  let gw: InvoiceGateway;
  const h = helpersOf(() => gw);

  beforeAll(async () => {
    gw = await startInvoiceGateway({ CLOCK: 'manual', USDT_RUB_RATE: '92.50' });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('usdtRate "92.50" and usdtAmount = netAmount / 92.50 rounded down to 6 decimals; sbp has none', async () => {
    const m = await h.fundedMerchant(['1000.00', '1000.00', '1000.00']);
    const trc = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_trc20', account: TRC20 });
    const bep = await payoutAddress(gw.operator, m.accountId, { method: 'usdt_bep20', account: BEP20 });
    const sbp = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });

    // 980.00 / 92.50 = 10.5945945… → 10.594594
    const t = await m.live.post('/v1/payouts', { amount: '1000.00', addressId: trc.id });
    expectStatus(t, 201);
    expect(t.body).toMatchObject({ method: 'usdt_trc20', feeAmount: '20.00', netAmount: '980.00', usdtRate: '92.50', usdtAmount: '10.594594' });
    expectUsdtRoundedDown(t.body);

    // 985.00 / 92.50 = 10.6486486… → 10.648648
    const b = await m.live.post('/v1/payouts', { amount: '1000.00', method: 'usdt_bep20', account: BEP20.toLowerCase() });
    expectStatus(b, 201);
    expect(b.body).toMatchObject({
      method: 'usdt_bep20',
      addressId: bep.id,
      feeAmount: '15.00',
      netAmount: '985.00',
      usdtRate: '92.50',
      usdtAmount: '10.648648',
    });
    expectUsdtRoundedDown(b.body);

    const s = await m.live.post('/v1/payouts', { amount: '1000.00', addressId: sbp.id });
    expectStatus(s, 201);
    expect(s.body).toMatchObject({ method: 'sbp', feeAmount: '10.00', netAmount: '990.00', usdtRate: null, usdtAmount: null });

    const got = await m.live.get(`/v1/payouts/${t.body.id}`);
    expectStatus(got, 200);
    expect(got.body).toEqual(t.body);
  });
});

describe('GET /v1/payouts/{id} poll limit (POLL_INTERVAL_SECONDS 3, CLOCK=manual)', () => {
  let gw: InvoiceGateway;
  const h = helpersOf(() => gw);

  beforeAll(async () => {
    // CLOCK=manual: the poll interval's seconds pass through the operator's clock, to the second.
    gw = await startInvoiceGateway({ CLOCK: 'manual' });
  });
  afterAll(async () => {
    await gw?.close();
  });

  const retryAfter = (r: Reply): number => {
    const value = r.headers.get('retry-after');
    expect(value).toMatch(/^\d+$/);
    return Number(value);
  };

  it('a second read of one payout within 3 s → 429 rate_limited with Retry-After; after the interval → 200', async () => {
    const m = await h.fundedMerchant(['1000.00']);
    const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
    const created = await m.live.post('/v1/payouts', { amount: '200.00', addressId: address.id, orderId: orderId('poll') });
    expectStatus(created, 201);
    const second = await m.live.post('/v1/payouts', { amount: '300.00', addressId: address.id, orderId: orderId('poll') });
    expectStatus(second, 201);

    const first = await m.live.get(`/v1/payouts/${created.body.id}`);
    expectStatus(first, 200);
    expect(first.body).toEqual(created.body);

    const limited = await m.live.get(`/v1/payouts/${created.body.id}`);
    expectError(limited, 429, 'rate_limited');
    expect(retryAfter(limited)).toBeGreaterThanOrEqual(1);
    expect(retryAfter(limited)).toBeLessThanOrEqual(3);

    // Another payout is polled on its own schedule.
    const other = await m.live.get(`/v1/payouts/${second.body.id}`);
    expectStatus(other, 200);

    await gw.operator.advance(1);
    const stillLimited = await m.live.get(`/v1/payouts/${created.body.id}`);
    expectError(stillLimited, 429, 'rate_limited');
    expect(retryAfter(stillLimited)).toBeGreaterThanOrEqual(1);
    expect(retryAfter(stillLimited)).toBeLessThanOrEqual(2);

    await gw.operator.advance(2);
    const again = await m.live.get(`/v1/payouts/${created.body.id}`);
    expectStatus(again, 200);
    expect(again.body).toEqual(created.body);
    expectError(await m.live.get(`/v1/payouts/${created.body.id}`), 429, 'rate_limited');

    // The list is not limited per payout.
    for (let i = 0; i < 3; i++) expectStatus(await m.live.get('/v1/payouts?limit=5'), 200);
  });
});
