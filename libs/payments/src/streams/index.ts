export * from './read-stream.query';
