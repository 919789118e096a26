export * from './access-control';
export * from './schema';
export * from './auth-failures';
export * from './operator-sessions';
export * from './credential-memory';
