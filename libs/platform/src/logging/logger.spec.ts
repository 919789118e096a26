import { createLogger } from './logger';

describe('the default log level', () => {
  const saved = process.env.LOG_LEVEL;
  afterEach(() => {
    if (saved === undefined) delete process.env.LOG_LEVEL;
    else process.env.LOG_LEVEL = saved;
  });

  it('is info, also under a test runner (JEST_WORKER_ID set): a gateway spawned with the whole environment logs as a user sees it', () => {
    // Before, the default was silent whenever JEST_WORKER_ID was set.
    expect(process.env.JEST_WORKER_ID).toBeDefined();
    delete process.env.LOG_LEVEL;
    expect(createLogger('gateway').level).toBe('info');
  });

  it('is LOG_LEVEL when set, and the level given when one is', () => {
    process.env.LOG_LEVEL = 'warn';
    expect(createLogger('gateway').level).toBe('warn');
    expect(createLogger('gateway', 'error').level).toBe('error');
  });
});
