export * from './access-control';
export * from './schema';
