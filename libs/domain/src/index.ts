export * from './methods';
export * from './invoices/fees';
export * from './invoices/invoice';
export * from './invoices/plan-invoice';
