export * from './schema';
export * from './webhook-rules';
export * from './http-delivery';
export * from './webhook-outbox';
export * from './webhook-dispatcher';
export * from './webhook-retention';
