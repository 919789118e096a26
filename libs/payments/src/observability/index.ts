export * from './gateway-metrics';
export * from './projection-lag';
export * from './webhook-queue';
export * from './get-projection-lag.query';
