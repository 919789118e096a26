import { randomBytes } from 'node:crypto';
import { Client, Pool } from 'pg';
import { createPool, migrate } from '#platform/database';
import { allMigrations } from '#payments/composition';

export interface TestDatabase {
  /** The database's URL: as the superuser, or as its owner role when made with `ownerRole`. */
  readonly url: string;
  readonly pool: Pool;
  /** The database's name. */
  readonly name: string;
  /** With `ownerRole`: the login role (no superuser, no CREATEROLE) that owns the database and ran its migrations. */
  readonly owner?: string;
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

/**
 * A new, empty, migrated database of its own for one test file. With `ownerRole`, it
 * belongs to a role of its own, an ordinary login role as a real deployment's gateway
 * role is: the url and pool log in as it, and it runs the migrations (its tables are its).
 */
export async function createTestDatabase(options: { migrate?: boolean; poolSize?: number; ownerRole?: boolean } = {}): Promise<TestDatabase> {
  const name = `test_${randomBytes(6).toString('hex')}`;
  const owner = options.ownerRole ? `owner_${name}` : undefined;
  const password = randomBytes(18).toString('hex');
  const admin = new Client({ connectionString: adminUrl() });
  await admin.connect();
  if (owner) await admin.query(`CREATE ROLE ${owner} LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD '${password}'`);
  await admin.query(`CREATE DATABASE ${name}${owner ? ` OWNER ${owner}` : ''}`);
  await admin.end();
  const address = new URL(databaseUrl(name));
  if (owner) {
    address.username = owner;
    address.password = password;
  }
  const url = address.toString();
  const pool = createPool(url, { max: options.poolSize ?? 20, applicationName: 'gateway-test' });
  if (options.migrate !== false) await migrate(pool, allMigrations);
  return {
    url,
    pool,
    name,
    owner,
    drop: async () => {
      await pool.end();
      const client = new Client({ connectionString: adminUrl() });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      if (owner) await client.query(`DROP ROLE IF EXISTS ${owner}`);
      await client.end();
    },
  };
}
