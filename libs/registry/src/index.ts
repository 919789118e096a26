export * from './registry';
export * from './schema';
