export * from './flow-observer';
export * from './flow-recovery.worker';
export * from './outcomes';
export * from './periodic-worker';
export * from './worker-items';
export * from './decided-now';
