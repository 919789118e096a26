export * from './listen-port';
