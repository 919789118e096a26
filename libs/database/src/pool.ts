import { Pool, PoolClient, types } from 'pg';

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
