export * from './event-store';
export * from './postgres/live-log-window';
export * from './postgres/postgres-event-store';
export * from './postgres/schema';
export * from './decider';
export * from './postgres/snapshot-store';
export * from './postgres/log-visibility';
