export * from './event-store';
export * from './postgres/postgres-event-store';
export * from './postgres/schema';
