import { createHash } from 'node:crypto';
import { Pool, PoolClient, QueryConfig, types } from 'pg';

// bigint columns (positions, revisions) come back as strings unless told otherwise;
// we parse them where they are read, as BigInt, never as a lossy number.
types.setTypeParser(types.builtins.INT8, (v: string) => v);

export type Database = Pool;

export function createPool(url: string, options: { max?: number; applicationName?: string } = {}): Pool {
  const pool = new Pool({
    connectionString: url,
    max: options.max ?? 20,
    application_name: options.applicationName ?? 'payment-gateway',
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
  });
  // An idle client losing its connection (database restart) must not crash the process.
  pool.on('error', () => undefined);
  // Nor may a checked-out one: pg-pool listens for a client's 'error' only while it is
  // idle, and a connection terminated between two queries of a checked-out client (a
  // transaction waiting on other work when the server shuts down) emits 'error' with
  // nobody listening, which kills the process. Its next query fails on its own ("not
  // queryable", a 503 for the API) and the pool discards it when it is released.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** Runs `work` in one transaction; rolls back on any error. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

const statementNames = new Map<string, string>();

/**
 * A query run as a named prepared statement: each connection parses and plans the
 * text once and then only binds and executes it, which saves the database most of
 * the work of a short query on the hot paths (key lookup, stream reads, appends).
 * The name derives from the text, so one text always has one name. For texts built
 * from a fixed set of fragments only: each distinct text is remembered (here and on
 * every connection), so a text carrying values inline would grow without bound.
 */
export function preparedStatement(text: string, values: unknown[] = []): QueryConfig {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `s_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    statementNames.set(text, name);
  }
  return { name, text, values };
}
