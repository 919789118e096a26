export * from './invoices/invoice-id';
export * from './invoices/invoice-view';
export * from './invoices/invoice-stream';
export * from './refunds/refund-flow';
export * from './payouts/payout-flow';
export * from './flows/outcomes';
export * from './payments.module';
export * from './payments.tokens';
