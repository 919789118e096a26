export * from './methods';
export * from './invoices/fees';
export * from './invoices/invoice';
export * from './invoices/plan-invoice';
export * from './refunds/refund';
export * from './payouts/payout';
export * from './payouts/payout-terms';
export * from './decider';
