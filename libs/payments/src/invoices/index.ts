export * from './expire-invoice.command';
export * from './invoice-expiry.worker';
export * from './invoice-id';
export * from './invoice-stream';
export * from './invoice-view';
export * from './invoices.read-model';
