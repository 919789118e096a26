export * from './invoice-id';
export * from './invoice-view';
export * from './invoice-service';
