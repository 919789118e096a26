import type { PoolClient } from 'pg';

/**
 * For a table that keeps a stream's folded state (`state` jsonb) with the revision it
 * has reached (`last_revision`): locks the row and answers its state with the event
 * at `revision` applied, or null when the row is missing or already past it (a
 * replayed batch changes nothing). The caller writes the new state and revision.
 */
export async function foldIntoRow<S>(
  tx: PoolClient,
  table: 'invoices' | 'payouts',
  id: string | number,
  revision: bigint,
  apply: (state: S) => S,
): Promise<S | null> {
  const row = await tx.query<{ state: S; last_revision: string }>(`SELECT state, last_revision FROM ${table} WHERE id = $1 FOR UPDATE`, [id]);
  const current = row.rows[0];
  if (!current || BigInt(current.last_revision) >= revision) return null;
  return apply(current.state);
}
