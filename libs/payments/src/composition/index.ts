export * from './infrastructure';
export * from './migrations';
export * from './services';
export * from './config';
