export * from './verify-ledgers';
