export * from './hash-chain';
export * from './log-checks';
export * from './chained-log';
export * from './recent-streams';
