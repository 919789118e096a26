export * from './pool';
export * from './migrate';
export * from './embedded-postgres';
export * from './one-turn-batches';
export * from './copy-rows';
export * from './binary-copy-out';
export * from './statement-watchdog';
export * from './outage-log';
