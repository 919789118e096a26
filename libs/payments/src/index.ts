export * from './invoice-id';
export * from './invoice-view';
export * from './invoice-service';
export * from './refund-service';
export * from './payout-service';
export * from './outcomes';
