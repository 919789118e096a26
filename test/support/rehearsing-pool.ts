import type { Pool, PoolClient, QueryConfig } from 'pg';

/**
 * The pool with every statement `matches` picks run once more before the real one, on
 * a client of its own in a transaction rolled back: `rehearse` gets that client and
 * `run` (which runs the statement there) and measures around it (rows read, rows
 * written). Every other use of the pool is the pool's own.
 */
export function rehearsingPool(
  pool: Pool,
  matches: (text: string) => boolean,
  rehearse: (client: PoolClient, run: () => Promise<unknown>) => Promise<void>,
): Pool {
  return new Proxy(pool, {
    get(target, property) {
      if (property === 'query') {
        return async (config: string | QueryConfig, values?: unknown[]) => {
          const text = typeof config === 'string' ? config : config.text;
          if (matches(text)) {
            const client = await target.connect();
            try {
              await client.query('BEGIN');
              await rehearse(client, () => client.query({ text, values: typeof config === 'string' ? values : config.values }));
            } finally {
              await client.query('ROLLBACK');
              client.release();
            }
          }
          return typeof config === 'string' ? target.query(config, values) : target.query(config);
        };
      }
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
