export * from './advance-refund.command';
export * from './complete-refund.command';
export * from './refund-processor.worker';
export * from './refund-flow';
export * from './refunds.read-model';
export * from './settle-refund-outcome.command';
