export * from './hash-chain';
export * from './log-checks';
