export * from './ledger-book';
export * from './verify-ledgers';
