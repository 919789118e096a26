export * from './merchant-events';
export * from './list-merchant-events.query';
