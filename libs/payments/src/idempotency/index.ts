export * from './keyed-request';
export * from './idempotency-keys';
export * from './schema';
