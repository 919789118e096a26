/**
 * The fee arithmetic of POST /invoices, table-driven, for every method and every way
 * of splitting the fee: customerFeePct > customerFeeShare (deprecated) > feePayer
 * (deprecated) > the project's slider. Every row is also read back by GET.
 *
 * Expected values are worked out by hand (the comments show the sums); on top of
 * them every answer is checked against the spec's identities in integer kopecks.
 */
import { expectStatus, InvoiceGateway, Json, Merchant, MONEY, orderId, startInvoiceGateway } from '../support/merchant-fixtures';

type ProjectName = 'usdt' | 'half' | 'zero' | 'plain';

interface Expected {
  feePct: string;
  feeAmount: string;
  customerFeePct: string | null;
  customerFeeShare: number;
  customerFeeAmount: string;
  payableAmount: string;
  netAmount: string;
  feePayer: 'merchant' | 'customer';
}

/** Shorthand for a row's expectation. */
const x = (
  feePct: string,
  feeAmount: string,
  customerFeePct: string | null,
  customerFeeShare: number,
  customerFeeAmount: string,
  payableAmount: string,
  netAmount: string,
): Expected => ({
  feePct,
  feeAmount,
  customerFeePct,
  customerFeeShare,
  customerFeeAmount,
  payableAmount,
  netAmount,
  feePayer: customerFeeAmount === '0.00' && (customerFeePct === null || customerFeePct === '0.00') ? 'merchant' : 'customer',
});

type Row = [label: string, project: ProjectName, request: Record<string, unknown>, expected: Expected];

// Projects: usdt = USDT on, slider 100 (the default); half = slider 50; zero = slider 0; plain = no USDT.
const METHOD_ROWS: Row[] = [
  // --- customerFeePct: 0, part, whole rate, for each method (1000.00) ---
  ['sbp, customerFeePct 0', 'usdt', { method: 'sbp', customerFeePct: 0 }, x('1.50', '15.00', '0.00', 0, '0.00', '1000.00', '985.00')],
  ['sbp, customerFeePct 0.5', 'usdt', { method: 'sbp', customerFeePct: 0.5 }, x('1.50', '15.00', '0.50', 33, '5.00', '1005.00', '990.00')],
  ['sbp, customerFeePct 1.5 (whole rate)', 'usdt', { method: 'sbp', customerFeePct: 1.5 }, x('1.50', '15.00', '1.50', 100, '15.00', '1015.00', '1000.00')],
  ['card, customerFeePct 0', 'usdt', { method: 'card', customerFeePct: 0 }, x('3.00', '30.00', '0.00', 0, '0.00', '1000.00', '970.00')],
  ['card, customerFeePct 1', 'usdt', { method: 'card', customerFeePct: 1 }, x('3.00', '30.00', '1.00', 33, '10.00', '1010.00', '980.00')],
  // 1000.00 × 1.2345 % = 12.345 → 12.35 (half-up); share 41.15 % → 41
  ['card, customerFeePct 1.2345', 'usdt', { method: 'card', customerFeePct: 1.2345 }, x('3.00', '30.00', '1.2345', 41, '12.35', '1012.35', '982.35')],
  ['card, customerFeePct 3 (whole rate)', 'usdt', { method: 'card', customerFeePct: 3 }, x('3.00', '30.00', '3.00', 100, '30.00', '1030.00', '1000.00')],
  ['crypto, customerFeePct 0', 'usdt', { method: 'crypto', customerFeePct: 0 }, x('2.00', '20.00', '0.00', 0, '0.00', '1000.00', '980.00')],
  // share 0.75 / 2.00 = 37.5 % → 38 (half-up)
  ['crypto, customerFeePct 0.75', 'usdt', { method: 'crypto', customerFeePct: 0.75 }, x('2.00', '20.00', '0.75', 38, '7.50', '1007.50', '987.50')],
  ['crypto, customerFeePct 2 (whole rate)', 'usdt', { method: 'crypto', customerFeePct: 2 }, x('2.00', '20.00', '2.00', 100, '20.00', '1020.00', '1000.00')],

  // --- customerFeeShare (deprecated), converted with the method's rate ---
  ['sbp, customerFeeShare 0', 'usdt', { method: 'sbp', customerFeeShare: 0 }, x('1.50', '15.00', '0.00', 0, '0.00', '1000.00', '985.00')],
  ['sbp, customerFeeShare 50 → 0.75 %', 'usdt', { method: 'sbp', customerFeeShare: 50 }, x('1.50', '15.00', '0.75', 50, '7.50', '1007.50', '992.50')],
  ['sbp, customerFeeShare 100 → 1.50 %', 'usdt', { method: 'sbp', customerFeeShare: 100 }, x('1.50', '15.00', '1.50', 100, '15.00', '1015.00', '1000.00')],
  ['card, customerFeeShare 0', 'usdt', { method: 'card', customerFeeShare: 0 }, x('3.00', '30.00', '0.00', 0, '0.00', '1000.00', '970.00')],
  [
    'card, customerFeeShare 33 → 3.00 × 33 % = 0.99 %',
    'usdt',
    { method: 'card', customerFeeShare: 33 },
    x('3.00', '30.00', '0.99', 33, '9.90', '1009.90', '979.90'),
  ],
  ['card, customerFeeShare 50 → 1.50 %', 'usdt', { method: 'card', customerFeeShare: 50 }, x('3.00', '30.00', '1.50', 50, '15.00', '1015.00', '985.00')],
  ['card, customerFeeShare 100 → 3.00 %', 'usdt', { method: 'card', customerFeeShare: 100 }, x('3.00', '30.00', '3.00', 100, '30.00', '1030.00', '1000.00')],
  ['crypto, customerFeeShare 0', 'usdt', { method: 'crypto', customerFeeShare: 0 }, x('2.00', '20.00', '0.00', 0, '0.00', '1000.00', '980.00')],
  ['crypto, customerFeeShare 33 → 0.66 %', 'usdt', { method: 'crypto', customerFeeShare: 33 }, x('2.00', '20.00', '0.66', 33, '6.60', '1006.60', '986.60')],
  ['crypto, customerFeeShare 50 → 1.00 %', 'usdt', { method: 'crypto', customerFeeShare: 50 }, x('2.00', '20.00', '1.00', 50, '10.00', '1010.00', '990.00')],
  [
    'crypto, customerFeeShare 100 → 2.00 %',
    'usdt',
    { method: 'crypto', customerFeeShare: 100 },
    x('2.00', '20.00', '2.00', 100, '20.00', '1020.00', '1000.00'),
  ],

  // --- feePayer (deprecated) alone ---
  ['sbp, feePayer merchant', 'usdt', { method: 'sbp', feePayer: 'merchant' }, x('1.50', '15.00', '0.00', 0, '0.00', '1000.00', '985.00')],
  ['sbp, feePayer customer', 'usdt', { method: 'sbp', feePayer: 'customer' }, x('1.50', '15.00', '1.50', 100, '15.00', '1015.00', '1000.00')],
  ['card, feePayer merchant', 'usdt', { method: 'card', feePayer: 'merchant' }, x('3.00', '30.00', '0.00', 0, '0.00', '1000.00', '970.00')],
  ['card, feePayer customer', 'usdt', { method: 'card', feePayer: 'customer' }, x('3.00', '30.00', '3.00', 100, '30.00', '1030.00', '1000.00')],
  ['crypto, feePayer merchant', 'usdt', { method: 'crypto', feePayer: 'merchant' }, x('2.00', '20.00', '0.00', 0, '0.00', '1000.00', '980.00')],
  ['crypto, feePayer customer', 'usdt', { method: 'crypto', feePayer: 'customer' }, x('2.00', '20.00', '2.00', 100, '20.00', '1020.00', '1000.00')],

  // --- priority: customerFeePct > customerFeeShare > feePayer > project ---
  [
    'card, customerFeePct 1 beats customerFeeShare 100 and feePayer merchant',
    'usdt',
    { method: 'card', customerFeePct: 1, customerFeeShare: 100, feePayer: 'merchant' },
    x('3.00', '30.00', '1.00', 33, '10.00', '1010.00', '980.00'),
  ],
  [
    'card, customerFeePct 0 beats feePayer customer',
    'usdt',
    { method: 'card', customerFeePct: 0, feePayer: 'customer' },
    x('3.00', '30.00', '0.00', 0, '0.00', '1000.00', '970.00'),
  ],
  [
    'sbp, customerFeePct 1.5 beats customerFeeShare 0',
    'usdt',
    { method: 'sbp', customerFeePct: 1.5, customerFeeShare: 0 },
    x('1.50', '15.00', '1.50', 100, '15.00', '1015.00', '1000.00'),
  ],
  [
    'card, customerFeeShare 50 beats feePayer merchant',
    'usdt',
    { method: 'card', customerFeeShare: 50, feePayer: 'merchant' },
    x('3.00', '30.00', '1.50', 50, '15.00', '1015.00', '985.00'),
  ],
  [
    'card, customerFeeShare 0 beats feePayer customer',
    'usdt',
    { method: 'card', customerFeeShare: 0, feePayer: 'customer' },
    x('3.00', '30.00', '0.00', 0, '0.00', '1000.00', '970.00'),
  ],
  [
    'crypto, customerFeeShare 0 beats the project slider 100',
    'usdt',
    { method: 'crypto', customerFeeShare: 0 },
    x('2.00', '20.00', '0.00', 0, '0.00', '1000.00', '980.00'),
  ],

  // --- the project default (the slider): 100 unless set ---
  ['sbp, nothing given, slider 100 (default)', 'usdt', { method: 'sbp' }, x('1.50', '15.00', '1.50', 100, '15.00', '1015.00', '1000.00')],
  ['card, nothing given, slider 100 (default)', 'usdt', { method: 'card' }, x('3.00', '30.00', '3.00', 100, '30.00', '1030.00', '1000.00')],
  ['crypto, nothing given, slider 100 (default)', 'usdt', { method: 'crypto' }, x('2.00', '20.00', '2.00', 100, '20.00', '1020.00', '1000.00')],
  ['sbp, nothing given, slider 50', 'half', { method: 'sbp' }, x('1.50', '15.00', '0.75', 50, '7.50', '1007.50', '992.50')],
  ['card, nothing given, slider 50', 'half', { method: 'card' }, x('3.00', '30.00', '1.50', 50, '15.00', '1015.00', '985.00')],
  ['crypto, nothing given, slider 50', 'half', { method: 'crypto' }, x('2.00', '20.00', '1.00', 50, '10.00', '1010.00', '990.00')],
  ['sbp, feePayer customer beats slider 50', 'half', { method: 'sbp', feePayer: 'customer' }, x('1.50', '15.00', '1.50', 100, '15.00', '1015.00', '1000.00')],
  ['sbp, customerFeePct 0 beats slider 50', 'half', { method: 'sbp', customerFeePct: 0 }, x('1.50', '15.00', '0.00', 0, '0.00', '1000.00', '985.00')],
  [
    'card, customerFeeShare 100 beats slider 50',
    'half',
    { method: 'card', customerFeeShare: 100 },
    x('3.00', '30.00', '3.00', 100, '30.00', '1030.00', '1000.00'),
  ],
  ['card, nothing given, slider 0', 'zero', { method: 'card' }, x('3.00', '30.00', '0.00', 0, '0.00', '1000.00', '970.00')],
  ['card, feePayer customer beats slider 0', 'zero', { method: 'card', feePayer: 'customer' }, x('3.00', '30.00', '3.00', 100, '30.00', '1030.00', '1000.00')],

  // --- rounding half-up to the kopeck ---
  // 10.50 × 1.50 % = 0.1575 → 0.16
  ['sbp 10.50: 0.1575 → 0.16, on the buyer', 'usdt', { amount: '10.50', method: 'sbp' }, x('1.50', '0.16', '1.50', 100, '0.16', '10.66', '10.50')],
  [
    'sbp 10.50: 0.1575 → 0.16, on the merchant',
    'usdt',
    { amount: '10.50', method: 'sbp', customerFeePct: 0 },
    x('1.50', '0.16', '0.00', 0, '0.00', '10.50', '10.34'),
  ],
  // 33.00 × 1.50 % = 0.495 → 0.50 (exactly half a kopeck: up)
  ['sbp 33.00: 0.495 → 0.50', 'usdt', { amount: '33.00', method: 'sbp', customerFeePct: 0 }, x('1.50', '0.50', '0.00', 0, '0.00', '33.00', '32.50')],
  // 10.10 × 1.50 % = 0.1515 → 0.15 (down)
  ['sbp 10.10: 0.1515 → 0.15', 'usdt', { amount: '10.10', method: 'sbp', customerFeePct: 0 }, x('1.50', '0.15', '0.00', 0, '0.00', '10.10', '9.95')],
  // 10.50 × 3 % = 0.315 → 0.32
  ['card 10.50: 0.315 → 0.32', 'usdt', { amount: '10.50', method: 'card', customerFeePct: 0 }, x('3.00', '0.32', '0.00', 0, '0.00', '10.50', '10.18')],
  // buyer 10.50 × 0.99 % = 0.10395 → 0.10; fee 0.32; net 10.50 − 0.22
  [
    'card 10.50, customerFeeShare 33: 0.10395 → 0.10',
    'usdt',
    { amount: '10.50', method: 'card', customerFeeShare: 33 },
    x('3.00', '0.32', '0.99', 33, '0.10', '10.60', '10.28'),
  ],
  // 500.25 × 2 % = 10.005 → 10.01
  [
    'crypto 500.25: 10.005 → 10.01, on the merchant',
    'usdt',
    { amount: '500.25', method: 'crypto', customerFeePct: 0 },
    x('2.00', '10.01', '0.00', 0, '0.00', '500.25', '490.24'),
  ],
  ['crypto 500.25: 10.005 → 10.01, on the buyer', 'usdt', { amount: 500.25, method: 'crypto' }, x('2.00', '10.01', '2.00', 100, '10.01', '510.26', '500.25')],
  // share 33 of 1.50 = 0.495 %; 100.00 × 0.495 % = 0.495 → 0.50
  [
    'sbp 100.00, customerFeeShare 33 → 0.495 %: 0.495 → 0.50',
    'usdt',
    { amount: '100.00', method: 'sbp', customerFeeShare: 33 },
    x('1.50', '1.50', '0.495', 33, '0.50', '100.50', '99.00'),
  ],
  // 999,999.99 × 1.50 % = 14,999.99985 → 15,000.00
  [
    'sbp 999,999.99: 14999.99985 → 15000.00',
    'usdt',
    { amount: '999999.99', method: 'sbp', customerFeePct: 0 },
    x('1.50', '15000.00', '0.00', 0, '0.00', '999999.99', '984999.99'),
  ],
  ['sbp 10.00 (the minimum): 0.15', 'usdt', { amount: 10, method: 'sbp' }, x('1.50', '0.15', '1.50', 100, '0.15', '10.15', '10.00')],
];

const NO_METHOD_ROWS: Row[] = [
  // 100.00: sbp and card hold it (crypto starts at 500.00) → the larger rate, 3.00
  ['100.00: sbp or card → 3.00', 'usdt', { amount: '100.00' }, x('3.00', '3.00', null, 100, '3.00', '103.00', '100.00')],
  ['1000.00: sbp, card or crypto → 3.00', 'usdt', { amount: '1000.00' }, x('3.00', '30.00', null, 100, '30.00', '1030.00', '1000.00')],
  // 700,000.00: above card's 600,000.00 → sbp or crypto → 2.00
  ['700,000.00: sbp or crypto → 2.00', 'usdt', { amount: '700000.00' }, x('2.00', '14000.00', null, 100, '14000.00', '714000.00', '700000.00')],
  // 2,000,000.00: only crypto
  ['2,000,000.00: crypto only → 2.00', 'usdt', { amount: '2000000.00' }, x('2.00', '40000.00', null, 100, '40000.00', '2040000.00', '2000000.00')],
  ['700,000.00 without USDT: sbp only → 1.50', 'plain', { amount: '700000.00' }, x('1.50', '10500.00', null, 100, '10500.00', '710500.00', '700000.00')],
  ['100.00 without USDT: sbp or card → 3.00', 'plain', { amount: '100.00' }, x('3.00', '3.00', null, 100, '3.00', '103.00', '100.00')],
  ['1000.00, customerFeePct 1', 'usdt', { amount: '1000.00', customerFeePct: 1 }, x('3.00', '30.00', null, 33, '10.00', '1010.00', '980.00')],
  ['1000.00, customerFeePct 0', 'usdt', { amount: '1000.00', customerFeePct: 0 }, x('3.00', '30.00', null, 0, '0.00', '1000.00', '970.00')],
  ['1000.00, customerFeeShare 50', 'usdt', { amount: '1000.00', customerFeeShare: 50 }, x('3.00', '30.00', null, 50, '15.00', '1015.00', '985.00')],
  ['1000.00, feePayer merchant', 'usdt', { amount: '1000.00', feePayer: 'merchant' }, x('3.00', '30.00', null, 0, '0.00', '1000.00', '970.00')],
  ['100.00, slider 50', 'half', { amount: '100.00' }, x('3.00', '3.00', null, 50, '1.50', '101.50', '98.50')],
  ['100.00, slider 0', 'zero', { amount: '100.00' }, x('3.00', '3.00', null, 0, '0.00', '100.00', '97.00')],
];

/** Money string → integer kopecks, exactly. */
const kopecks = (money: string) => {
  expect(money).toMatch(MONEY);
  const [rubles, cents] = money.split('.');
  return Number(rubles) * 100 + Number(cents);
};

describe('fee arithmetic of POST /invoices', () => {
  let gw: InvoiceGateway;
  const projects = {} as Record<ProjectName, Merchant>;

  beforeAll(async () => {
    gw = await startInvoiceGateway({
      // Sends more than 60 requests a second with one key; the rate limit has its own suite (rate-limits.spec.ts).
      RATE_LIMIT_PER_SECOND: '1000000',
    });
    const accountId = await gw.operator.createAccount();
    [projects.usdt, projects.half, projects.zero, projects.plain] = await Promise.all([
      gw.operator.merchant({ usdtEnabled: true }, accountId),
      gw.operator.merchant({ usdtEnabled: true, customerFeeShare: 50 }, accountId),
      gw.operator.merchant({ usdtEnabled: true, customerFeeShare: 0 }, accountId),
      gw.operator.merchant({}, accountId),
    ]);
    expect(projects.usdt.project.customerFeeShare ?? 100).toBe(100);
  });
  afterAll(async () => {
    await gw?.close();
  });

  async function check(project: ProjectName, request: Record<string, unknown>, expected: Expected, method: string | null) {
    const client = projects[project].test;
    const created = await client.post('/v1/invoices', { amount: '1000.00', orderId: orderId(), ...request });
    expectStatus(created, 201);
    const got = await client.get(`/v1/invoices/${created.body.id}`);
    expectStatus(got, 200);
    for (const body of [created.body, got.body] as Json[]) {
      const fields = Object.fromEntries(Object.keys(expected).map((k) => [k, body[k]]));
      expect(fields).toEqual(expected);
      // The spec's identities, in kopecks.
      const amount = kopecks(body.amount);
      expect(kopecks(body.payableAmount)).toBe(amount + kopecks(body.customerFeeAmount));
      expect(kopecks(body.netAmount)).toBe(amount - (kopecks(body.feeAmount) - kopecks(body.customerFeeAmount)));
      expect(kopecks(body.customerFeeAmount)).toBeLessThanOrEqual(kopecks(body.feeAmount));
    }
    expect(got.body.method).toBe(method);
  }

  it.each(METHOD_ROWS)('%s', async (_, project, request, expected) => {
    await check(project, request, expected, request.method as string);
  });

  it.each(NO_METHOD_ROWS)('no method, %s: the largest rate of the methods that hold the amount, customerFeePct null', async (_, project, request, expected) => {
    await check(project, request, expected, null);
  });

  it('the rate of a project override is used, and its customerFeeShare conversion rounds half-up to 1/10000 %', async () => {
    // 1.2345 % × 50 % = 0.61725 % → 0.6173 %; 1000.00 × 0.6173 % = 6.173 → 6.17; fee 12.345 → 12.35
    const m = await gw.operator.merchant({ methods: { sbp: { feePct: '1.2345' } } });
    const r = await m.test.post('/v1/invoices', { amount: '1000.00', orderId: orderId(), method: 'sbp', customerFeeShare: 50 });
    expectStatus(r, 201);
    expect(r.body).toMatchObject({
      feePct: '1.2345',
      feeAmount: '12.35',
      customerFeePct: '0.6173',
      customerFeeShare: 50,
      customerFeeAmount: '6.17',
      payableAmount: '1006.17',
      netAmount: '993.82',
      feePayer: 'customer',
    });
  });

  it('an open invoice keeps its amounts when the project changes its rates or slider afterwards', async () => {
    const m = await gw.operator.merchant({ usdtEnabled: true });
    const r = await m.test.post('/v1/invoices', { amount: '1000.00', orderId: orderId(), method: 'card' });
    expectStatus(r, 201);
    await gw.operator.patchProject(m.projectId, { customerFeeShare: 0, methods: { card: { feePct: 5 } } });
    const got = await m.test.get(`/v1/invoices/${r.body.id}`);
    expect(got.body).toMatchObject({ feePct: '3.00', feeAmount: '30.00', customerFeePct: '3.00', payableAmount: '1030.00', netAmount: '1000.00' });
    // A new invoice uses the new terms.
    const fresh = await m.test.post('/v1/invoices', { amount: '1000.00', orderId: orderId(), method: 'card' });
    expect(fresh.body).toMatchObject({ feePct: '5.00', feeAmount: '50.00', customerFeePct: '0.00', netAmount: '950.00', feePayer: 'merchant' });
  });
});
