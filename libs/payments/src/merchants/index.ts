export * from './registry';
export * from './schema';
export * from './payout-addresses';
export * from './webhook-secrets';
