export * from './clock';
export * from './manual-clock-sync';
export * from './iso-instant';
