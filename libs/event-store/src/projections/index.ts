export * from './projection';
export * from './checkpoints';
export * from './projection-runner';
export * from './rebuild';
export * from './progress-bar';
export * from './schema';
