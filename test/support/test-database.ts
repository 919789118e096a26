import { randomBytes } from 'node:crypto';
import { Client, Pool } from 'pg';
import { createPool, migrate } from '#platform/database';
import { allMigrations } from '#payments/composition';
import { temporaryDataDir } from './gateway-process';
import { startPrivatePostgres } from './private-postgres';

export interface TestDatabase {
  /** The database's URL: as the superuser, or as its owner role when made with `ownerRole`. */
  readonly url: string;
  readonly pool: Pool;
  /** The database's name. */
  readonly name: string;
  /** With `ownerRole`: the login role (no superuser, no CREATEROLE) that owns the database and ran its migrations. */
  readonly owner?: string;
  /** The superuser's URL of the server the database is on (its `postgres` database): another session of that cluster. */
  readonly adminUrl: string;
  drop(): Promise<void>;
}

function sharedAdminUrl(): string {
  const url = process.env.TEST_ADMIN_DATABASE_URL;
  if (!url) throw new Error('TEST_ADMIN_DATABASE_URL is not set: run the tests through jest (npm test)');
  return url;
}

export function databaseUrl(name: string, admin = sharedAdminUrl()): string {
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Options of createTestDatabase. */
export interface TestDatabaseOptions {
  migrate?: boolean;
  poolSize?: number;
  ownerRole?: boolean;
  /**
   * On a private embedded server started for it (stopped and removed by drop) instead
   * of the run's shared one. For a file that holds the cluster's horizon (a transaction
   * id left open, by any session of the server): a transaction id held on the shared
   * server holds back every file's log readers (projections, reactors, log:verify), as
   * docs/operations.md says of a cluster, and the files running beside it stall and flake.
   */
  serverOfItsOwn?: boolean;
  /**
   * With `serverOfItsOwn`: server settings that take a restart (ALTER SYSTEM, then the
   * server started again on its port), such as `max_prepared_transactions`, which an
   * operator's own server may allow and the embedded one does not.
   */
  serverSettings?: Readonly<Record<string, string>>;
}

/**
 * A new, empty, migrated database of its own for one test file. With `ownerRole`, it
 * belongs to a role of its own, an ordinary login role as a real deployment's gateway
 * role is: the url and pool log in as it, and it runs the migrations (its tables are its).
 */
export async function createTestDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const server = options.serverOfItsOwn ? await privateServer(options.serverSettings ?? {}) : null;
  try {
    return await createOn(server?.adminUrl ?? sharedAdminUrl(), options, server);
  } catch (error) {
    await server?.stop();
    throw error;
  }
}

interface PrivateServer {
  readonly adminUrl: string;
  stop(): Promise<void>;
}

async function privateServer(settings: Readonly<Record<string, string>>): Promise<PrivateServer> {
  const data = temporaryDataDir();
  const restart = Object.keys(settings).length > 0;
  try {
    let server = await startPrivatePostgres(data.dir, { databaseName: 'postgres', removeWhenStopped: !restart });
    if (restart) {
      try {
        const admin = new Client({ connectionString: server.url });
        await admin.connect();
        try {
          for (const [name, value] of Object.entries(settings))
            await admin.query(`ALTER SYSTEM SET ${admin.escapeIdentifier(name)} = ${admin.escapeLiteral(value)}`);
        } finally {
          await admin.end();
        }
      } finally {
        await server.stop();
      }
      // Started again on whatever port is free (its old one when it still is): nobody holds its URL yet.
      server = await startPrivatePostgres(data.dir, { databaseName: 'postgres', removeWhenStopped: true });
    }
    return {
      adminUrl: server.url,
      stop: async () => {
        await server.stop();
        data.remove();
      },
    };
  } catch (error) {
    data.remove();
    throw error;
  }
}

async function createOn(admin: string, options: TestDatabaseOptions, server: PrivateServer | null): Promise<TestDatabase> {
  const name = `test_${randomBytes(6).toString('hex')}`;
  const owner = options.ownerRole ? `owner_${name}` : undefined;
  const password = randomBytes(18).toString('hex');
  const creator = new Client({ connectionString: admin });
  await creator.connect();
  if (owner) await creator.query(`CREATE ROLE ${owner} LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD '${password}'`);
  await creator.query(`CREATE DATABASE ${name}${owner ? ` OWNER ${owner}` : ''}`);
  await creator.end();
  const address = new URL(databaseUrl(name, admin));
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
    adminUrl: admin,
    drop: async () => {
      if (server) {
        try {
          await pool.end();
        } finally {
          await server.stop();
        }
        return;
      }
      await pool.end();
      const client = new Client({ connectionString: admin });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      if (owner) await client.query(`DROP ROLE IF EXISTS ${owner}`);
      await client.end();
    },
  };
}
