export * from './get-log-checkpoint.query';
export * from './checkpoint-key';
