import { BALANCE_TRANSACTION_TYPES, balanceTransactionOf, balanceTransactionSource, payoutCauses } from './balance-transactions';

describe('balance transactions from entry kinds and causes', () => {
  it('names each movement with its invoice, refund or payout', () => {
    expect(balanceTransactionOf('payment_recorded', 'payment:inv-1')).toEqual({ type: 'payment', invoiceId: 'inv-1', refundId: null, payoutId: null });
    expect(balanceTransactionOf('hold_released', 'hold_release:inv-1')).toMatchObject({ type: 'hold_released', invoiceId: 'inv-1' });
    expect(balanceTransactionOf('funds_reserved', 'reserve:rf_abc')).toEqual({ type: 'refund_reserved', invoiceId: null, refundId: 'rf_abc', payoutId: null });
    expect(balanceTransactionOf('reservation_settled', 'settle:po_42')).toEqual({ type: 'payout_paid', invoiceId: null, refundId: null, payoutId: 42 });
    expect(balanceTransactionOf('reservation_released', 'release:po_7')).toMatchObject({ type: 'payout_returned', payoutId: 7 });
    expect(balanceTransactionOf('reservation_refused', 'reserve:po_7')).toBeNull();
  });

  it('every type comes from one kind and purpose, and back', () => {
    for (const type of BALANCE_TRANSACTION_TYPES) {
      const [kind, purpose] = balanceTransactionSource(type);
      const verb =
        { payment_recorded: 'payment', hold_released: 'hold_release', funds_reserved: 'reserve', reservation_settled: 'settle' }[kind as string] ?? 'release';
      expect(balanceTransactionOf(kind, `${verb}:${purpose === 'payout' ? 'po_1' : purpose === 'refund' ? 'rf_1' : 'inv'}`)?.type).toBe(type);
    }
    expect(payoutCauses(3)).toEqual(['reserve:po_3', 'settle:po_3', 'release:po_3']);
  });
});
