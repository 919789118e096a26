export * from './get-balance-as-of.query';
export * from './get-balance.query';
export * from './get-ledger-balance.query';
