import type { Pool } from 'pg';

/**
 * How long the webhook history is kept: a delivery that is finished (delivered, or
 * failed for good) goes with its attempts once its last attempt and its enqueueing
 * are older than the retention period (WEBHOOK_RETENTION_DAYS, default 30) on the
 * gateway clock. Pending deliveries are never swept (their schedule ends within 39
 * hours, unless no dispatcher can sign them: they wait, pending, until one can). The outbox does not enqueue again an event older than the same period
 * that it already passed (webhookOutbox), so a replay can never send a swept delivery again.
 */
export const DEFAULT_WEBHOOK_RETENTION_DAYS = 30;

/**
 * The longest retention period (100 years): its horizon, now minus the period, stays
 * a timestamp PostgreSQL and JavaScript take for centuries. 999999999 days put it
 * past both, and every sweep failed ("timestamp out of range").
 */
export const MAX_WEBHOOK_RETENTION_DAYS = 36_500;

export const retentionHorizon = (now: Date, retentionDays: number): Date => new Date(now.getTime() - retentionDays * 86_400_000);

/**
 * Deletes up to `batch` finished deliveries past the horizon, with their attempts;
 * answers how many. Two statements in one transaction: the first locks the candidates
 * (old, finished, no recent attempt in its snapshot; those another transaction holds
 * are left for a later sweep), the second, with a snapshot taken once they are locked,
 * checks their attempts again and deletes them with their history. An attempt is
 * recorded only under its delivery's lock (the dispatcher's record statement), so one
 * recorded after the first statement's snapshot is seen by the second, and none can be
 * recorded for a delivery once it is locked here: no history row outlives its delivery
 * (the history has no foreign key, decision 0094).
 */
export async function sweepWebhookHistory(pool: Pool, now: Date, retentionDays: number, batch = 1000): Promise<number> {
  const horizon = retentionHorizon(now, retentionDays);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const locked = await client.query<{ id: string }>(
      `SELECT d.id FROM webhook_deliveries d
       WHERE d.created_at < $1 AND d.status <> 'pending'
         AND NOT EXISTS (SELECT 1 FROM webhook_attempts a WHERE a.delivery_id = d.id AND a.at >= $1)
       ORDER BY d.created_at LIMIT $2
       FOR UPDATE OF d SKIP LOCKED`,
      [horizon, batch],
    );
    let deleted = 0;
    if (locked.rows.length > 0) {
      const r = await client.query(
        `WITH gone AS (
           SELECT d.id FROM webhook_deliveries d
           WHERE d.id = ANY($2::uuid[]) AND d.status <> 'pending'
             AND NOT EXISTS (SELECT 1 FROM webhook_attempts a WHERE a.delivery_id = d.id AND a.at >= $1)),
         attempts AS (DELETE FROM webhook_attempts a USING gone WHERE a.delivery_id = gone.id)
         DELETE FROM webhook_deliveries d USING gone WHERE d.id = gone.id`,
        [horizon, locked.rows.map((row) => row.id)],
      );
      deleted = r.rowCount ?? 0;
    }
    await client.query('COMMIT');
    return deleted;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
