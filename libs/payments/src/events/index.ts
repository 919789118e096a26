export * from './merchant-events';
