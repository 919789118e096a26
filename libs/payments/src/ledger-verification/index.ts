export * from './verify-ledgers';
export * from './verify-flow-read-models';
