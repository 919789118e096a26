/**
 * How many rows a statement reads, as PostgreSQL reports it: a test of a query's cost
 * that does not depend on the machine's speed (never a time).
 */
import type { Pool } from 'pg';

interface PlanNode {
  readonly 'Relation Name'?: string;
  readonly 'Actual Rows': number;
  readonly 'Actual Loops': number;
  readonly 'Rows Removed by Filter'?: number;
  readonly 'Rows Removed by Index Recheck'?: number;
  readonly Plans?: readonly PlanNode[];
}

/** A pool that runs each statement under EXPLAIN ANALYZE first and keeps the rows its table scans read. */
export function measuringPool(pool: Pool, table: string): { pool: Pick<Pool, 'query'>; rowsRead: () => number } {
  let read = 0;
  const count = (node: PlanNode): number =>
    (node['Relation Name'] === table
      ? // EXPLAIN gives each count per loop
        (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) * node['Actual Loops']
      : 0) + (node.Plans ?? []).reduce((sum, child) => sum + count(child), 0);
  return {
    pool: {
      query: (async (sql: string, params: unknown[]) => {
        const plan = await pool.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
        read += count(plan.rows[0]!['QUERY PLAN'][0].Plan);
        return pool.query(sql, params);
      }) as Pick<Pool, 'query'>['query'],
    },
    rowsRead: () => read,
  };
}
