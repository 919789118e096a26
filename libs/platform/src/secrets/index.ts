export * from './secret-box';
export * from './secrets-key-file';
export * from './secret-file';
export * from './signing-key-id';
