/**
 * planInvoice's limits that no project setting can widen: an invoice of nothing is
 * none (paid, it could not be posted to the ledger, whose reactor would stop at it), and
 * what the buyer pays is one amount of money, at most MAX_MONEY_KOPECKS.
 */
import { MAX_MONEY_KOPECKS, Refusal } from '#ledger';
import type { MethodTerms } from '../methods';
import { InvoiceRequest, planInvoice, ProjectTerms } from './plan-invoice';
import { invoiceRequest } from '../../../../test/support/invoice-request';

const sbp = (over: Partial<MethodTerms> = {}): MethodTerms => ({
  code: 'sbp',
  title: 'СБП',
  feePct: 15_000,
  min: 0,
  max: MAX_MONEY_KOPECKS,
  enabled: true,
  ...over,
});
const project = (methods: MethodTerms[]): ProjectTerms => ({ projectId: 'p', accountId: 'a', mode: 'test', methods, customerFeeShare: 100 });
const request = (amount: number, method: 'sbp' | null = 'sbp'): InvoiceRequest => invoiceRequest({ amount, orderId: 'o-1', method });
const refusalOf = (plan: () => unknown): Refusal => {
  try {
    plan();
  } catch (error) {
    if (error instanceof Refusal) return error;
    throw error;
  }
  throw new Error('planned, not refused');
};
const NOW = new Date('2026-11-29T00:00:00Z');

describe('planInvoice: limits no setting widens', () => {
  it.each([
    ['the method', 'sbp' as const],
    ['no method', null],
  ])('a minimum of 0.00 still refuses 0.00 (%s), and names 0.01 as the least', (_, method) => {
    const refusal = refusalOf(() => planInvoice('i', request(0, method), project([sbp()]), NOW));
    expect({ code: refusal.code, param: refusal.param }).toEqual({ code: 'amount_out_of_range', param: 'amount' });
    expect(refusal.message).toContain('от 0.01 до');
    expect(planInvoice('i', request(1, method), project([sbp()]), NOW).amounts.payableAmount).toBe(1);
  });

  it('what the buyer pays may not pass the largest amount: 422, not a RangeError', () => {
    const refusal = refusalOf(() => planInvoice('i', request(MAX_MONEY_KOPECKS), project([sbp()]), NOW));
    expect({ code: refusal.code, param: refusal.param }).toEqual({ code: 'amount_out_of_range', param: 'amount' });
    // 1.5 % on top of the largest amount that leaves room for it.
    const fits = Math.floor(MAX_MONEY_KOPECKS / 1.015);
    expect(planInvoice('i', request(fits), project([sbp()]), NOW).amounts.payableAmount).toBeLessThanOrEqual(MAX_MONEY_KOPECKS);
  });
});

describe('planInvoice: the refusal of an amount no enabled method takes says what is taken', () => {
  const crypto = (over: Partial<MethodTerms> = {}): MethodTerms => sbp({ code: 'crypto', title: 'USDT', ...over });

  it('with a gap between the methods (sbp to 100.00, crypto from 500.00), an amount in it is refused naming each method’s range', () => {
    const methods = project([sbp({ min: 1000, max: 10_000 }), crypto({ min: 50_000, max: 500_000_000 })]);
    for (const amount of [20_000, 10_001, 49_999, 999, 500_000_001]) {
      const refusal = refusalOf(() => planInvoice('i', request(amount, null), methods, NOW));
      expect({ amount, code: refusal.code, param: refusal.param, message: refusal.message }).toEqual({
        amount,
        code: 'amount_out_of_range',
        param: 'amount',
        message: 'Ни один включённый способ оплаты не принимает эту сумму: sbp — от 10.00 до 100.00, crypto — от 500.00 до 5000000.00',
      });
    }
    expect(planInvoice('i', request(10_000, null), methods, NOW).methodRates).toEqual({ sbp: 15_000 });
    expect(planInvoice('i', request(50_000, null), methods, NOW).methodRates).toEqual({ crypto: 15_000 });
  });

  it('ranges that join up (overlapping, or one kopeck apart) are one range; a disabled method’s is not named', () => {
    const joined = project([
      crypto({ min: 10_001, max: 500_000_000 }),
      sbp({ min: 1000, max: 10_000 }),
      sbp({ code: 'card', title: 'Карта', min: 20_000_000, max: 900_000_000, enabled: false }),
    ]);
    for (const amount of [999, 500_000_001]) {
      expect(refusalOf(() => planInvoice('i', request(amount, null), joined, NOW)).message).toBe('Сумма должна быть от 10.00 до 5000000.00');
    }
    expect(planInvoice('i', request(10_001, null), joined, NOW).methodRates).toEqual({ crypto: 15_000 });
  });
});
