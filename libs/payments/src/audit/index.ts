export * from './account-statement';
export * from './audit-reports.query';
export * from './reconciliation';
export * from './trial-balance';
export * from './get-log-checkpoint.query';
export * from './signing-keys';
export * from './posted-through';
export * from './statement-in-log';
