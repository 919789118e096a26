export * from './log-tail-signal';
export * from './log-visibility';
export * from './postgres-event-store';
export * from './schema';
export * from './snapshot-store';
export * from './event-log-audit';
export * from './timestamptz';
export * from './server-past-log';
