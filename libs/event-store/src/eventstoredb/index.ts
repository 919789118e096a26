export * from './connection';
export * from './eventstoredb-event-store';
export * from './log-reads';
export * from './mapping';
export * from './subscription';
