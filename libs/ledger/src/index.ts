export * from './money';
export * from './ledger';
export * from './ledger-id';
export * from './ledger-decider';
export * from './ledger-snapshot';
export * from './uuid-v5';
export * from './finance-reports';
export * from './balance-history';
