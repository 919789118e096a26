import { randomBytes } from 'node:crypto';
import { Client, Pool } from 'pg';
import { createPool, migrate } from '#platform/database';
import { allMigrations } from '#payments/composition';

export interface TestDatabase {
  readonly url: string;
  readonly pool: Pool;
  drop(): Promise<void>;
}

function adminUrl(): string {
  const url = process.env.TEST_ADMIN_DATABASE_URL;
  if (!url) throw new Error('TEST_ADMIN_DATABASE_URL is not set: run the tests through jest (npm test)');
  return url;
}

export function databaseUrl(name: string): string {
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

/** A new, empty, migrated database of its own for one test file. */
export async function createTestDatabase(options: { migrate?: boolean; poolSize?: number } = {}): Promise<TestDatabase> {
  const name = `test_${randomBytes(6).toString('hex')}`;
  const admin = new Client({ connectionString: adminUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = databaseUrl(name);
  const pool = createPool(url, { max: options.poolSize ?? 20, applicationName: 'gateway-test' });
  if (options.migrate !== false) await migrate(pool, allMigrations);
  return {
    url,
    pool,
    drop: async () => {
      await pool.end();
      const client = new Client({ connectionString: adminUrl() });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}
