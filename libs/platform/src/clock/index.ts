export * from './clock';
export * from './manual-clock-sync';
