/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: '<rootDir>/test/support/test-environment.ts',
  roots: ['<rootDir>/libs', '<rootDir>/apps', '<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json', diagnostics: false }],
  },
  // The subpath imports of package.json ("#domain", "#payments/invoices", ...) point at the
  // compiled files for plain Node; the tests run the TypeScript sources.
  moduleNameMapper: {
    '^#(domain|ledger|event-store|payments)$': '<rootDir>/libs/$1/src/index.ts',
    '^#(event-store|platform|payments)/(.+)$': '<rootDir>/libs/$1/src/$2/index.ts',
  },
  moduleFileExtensions: ['ts', 'js', 'json'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 60_000,
  maxWorkers: 2,
};
