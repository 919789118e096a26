export * from './infrastructure';
export * from './migrations';
export * from './config';
