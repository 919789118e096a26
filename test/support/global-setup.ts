import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
// Jest loads its global set-up outside its module map (moduleNameMapper does not apply),
// and plain Node would resolve '#platform/database' to dist/, which is built below: the source.
import { makeTraversable, startEmbeddedPostgres } from '../../libs/platform/src/database';

/**
 * One PostgreSQL server for the whole run: DATABASE_URL when set, otherwise an
 * embedded server in a throw-away folder. Each test file then makes its own
 * database on it (test/support/test-database.ts), so files run in parallel.
 */
export default async function globalSetup(): Promise<void> {
  buildOnce();
  if (process.env.DATABASE_URL) {
    process.env.TEST_ADMIN_DATABASE_URL = process.env.DATABASE_URL;
    return;
  }
  const dir = path.resolve(__dirname, '../../.tmp', `test-postgres-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(path.dirname(dir), { recursive: true });
  makeTraversable(dir);
  const server = await startEmbeddedPostgres(dir, { databaseName: 'postgres' });
  process.env.TEST_ADMIN_DATABASE_URL = server.url;
  (globalThis as Record<string, unknown>).__TEST_POSTGRES__ = { server, dir };
}

/**
 * The process-level tests start the compiled gateway (`dist/`) with the node flags of
 * its npm script (npm's own part, the signals it passes on: gateway-process.spec.ts);
 * build it once for the whole run, and the SDK package with it.
 */
function buildOnce(): void {
  const root = path.resolve(__dirname, '../..');
  const result = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-b', 'tsconfig.build.json'], {
    cwd: root,
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`build failed before the tests:\n${result.stdout}${result.stderr}`);
  // The merchant SDK's own build (libs/sdk/dist): the example and the package test use it.
  const sdk = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'libs/sdk/tsconfig.json'], { cwd: root, encoding: 'utf8' });
  if (sdk.status !== 0) throw new Error(`SDK build failed before the tests:\n${sdk.stdout}${sdk.stderr}`);
}
