// Lint: typescript-eslint's recommended rules, Prettier's style (prettier --check), and the
// dependency rules of the layout (eslint-plugin-boundaries): pure libraries import only
// each other, libraries never import apps, and a library is entered only through its
// index (or a capability's index, `#payments/invoices`). See docs/architecture.md. No regular
// expression whose time grows faster than its input (eslint-plugin-regexp): a request's text
// reaches many of them.
const js = require('@eslint/js');
const tseslint = require('typescript-eslint');
const boundaries = require('eslint-plugin-boundaries');
const prettier = require('eslint-config-prettier');
const regexp = require('eslint-plugin-regexp');

const PURE = ['domain', 'ledger'];
const LIBRARIES = ['payments', 'event-store', 'platform', ...PURE];
/** Which element may import which (a library never imports an app). */
const MAY_IMPORT = {
  domain: PURE,
  ledger: PURE,
  platform: ['platform'],
  'event-store': ['event-store', 'platform', ...PURE],
  payments: LIBRARIES,
  app: ['app', ...LIBRARIES],
  test: ['test', 'bench', 'app', 'sdk', ...LIBRARIES],
  bench: ['bench', 'app', ...LIBRARIES],
  // The merchant SDK is published on its own: it imports nothing of the gateway.
  sdk: ['sdk'],
};
/** The files through which a library is entered from outside it. */
const ENTRY_POINTS = {
  domain: 'index.ts|testing/*.ts',
  ledger: 'index.ts',
  platform: '*/index.ts',
  'event-store': 'index.ts|*/index.ts',
  payments: 'index.ts|*/index.ts',
  sdk: 'index.ts',
};

module.exports = tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '**/*.js', 'test/lint/fixtures/**', 'libs/sdk/dist/**', 'libs/sdk/src/generated/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    files: ['**/*.ts'],
    plugins: { boundaries },
    settings: {
      'import/resolver': { [require.resolve('./scripts/eslint-import-resolver.js')]: {} },
      'boundaries/include': ['apps/**/*.ts', 'libs/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'],
      'boundaries/elements': [
        { type: 'domain', pattern: 'libs/domain/src' },
        { type: 'ledger', pattern: 'libs/ledger/src' },
        { type: 'platform', pattern: 'libs/platform/src' },
        { type: 'event-store', pattern: 'libs/event-store/src' },
        { type: 'payments', pattern: 'libs/payments/src' },
        { type: 'sdk', pattern: 'libs/sdk/src' },
        { type: 'app', pattern: 'apps/*/src', capture: ['app'] },
        { type: 'test', pattern: 'test' },
        { type: 'bench', pattern: 'bench' },
      ],
    },
    rules: {
      'boundaries/dependencies': [
        'error',
        {
          default: 'disallow',
          message: '{{from.type}} must not import {{to.type}} {{dependency.source}} (layout rules: docs/architecture.md)',
          policies: [
            ...Object.entries(MAY_IMPORT).map(([from, to]) => ({ from: { element: { type: from } }, allow: { to: { element: { type: to } } } })),
            // A library's own tests may use the shared test support.
            { from: { element: { type: LIBRARIES, fileInternalPath: '**/*.spec.ts' } }, allow: { to: { element: { type: 'test' } } } },
            // Another library is entered only through its index (a capability's index for the
            // libraries grouped by capability): never a file past it.
            ...Object.entries(ENTRY_POINTS).map(([library, entries]) => ({
              from: { element: { type: `!${library}` } },
              disallow: { to: { element: { type: library, fileInternalPath: `!(${entries})` } } },
              message: 'import {{to.type}} through its index, not {{dependency.source}} (layout rules: docs/architecture.md)',
            })),
          ],
        },
      ],
      // Defensive initial values before try/catch flows; TypeScript's definite-assignment
      // analysis already refuses a read of a variable never assigned.
      'no-useless-assignment': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // A regular expression that a long enough text makes take quadratic or worse time
    // (the gateway's and the SDK's code; tests and benches read their own texts).
    files: ['apps/**/*.ts', 'libs/**/*.ts'],
    ignores: ['**/*.spec.ts'],
    plugins: { regexp },
    rules: { 'regexp/no-super-linear-move': 'error', 'regexp/no-super-linear-backtracking': 'error' },
  },
  {
    // The pure libraries: no I/O, no framework, no driver.
    files: ['libs/domain/**/*.ts', 'libs/ledger/**/*.ts'],
    ignores: ['**/*.spec.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(?!\\.|#domain$|#ledger$|node:crypto$)',
              message: 'libs/domain and libs/ledger are pure: they import only each other (and node:crypto)',
            },
          ],
        },
      ],
    },
  },
  {
    // The SDK: Node's own modules and its own files only (no gateway library, no dependency).
    files: ['libs/sdk/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^(?!\\.|node:)', message: 'libs/sdk is published alone: it imports only its own files and node: modules' }] },
      ],
    },
  },
  {
    // The examples run as plain Node modules.
    files: ['examples/**/*.mjs'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        URL: 'readonly',
        URLSearchParams: 'readonly',
        fetch: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        AbortSignal: 'readonly',
      },
    },
  },
);
