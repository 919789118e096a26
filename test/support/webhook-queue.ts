/**
 * An `INSERT INTO webhook_deliveries ...` of pending deliveries (no RETURNING), made into
 * one statement that also queues each of them in `webhook_queue`, as the outbox does;
 * it answers their ids and due times in the order they were inserted.
 */
export const queued = (insertIntoDeliveries: string): string =>
  `WITH enqueued AS (${insertIntoDeliveries} RETURNING id, seq, url, next_attempt_at, attempts_made),
   queued AS (
     INSERT INTO webhook_queue (id, seq, url, next_attempt_at, attempts_made, schedule_base)
     SELECT id, seq, url, next_attempt_at, attempts_made, 0 FROM enqueued)
   SELECT id, next_attempt_at FROM enqueued ORDER BY seq`;

/** Empties the webhook tables (history, queue, records), so that each test's deliveries are alone in the queue. */
export async function emptyWebhookTables(pool: { query: (sql: string) => Promise<unknown> }): Promise<void> {
  await pool.query('DELETE FROM webhook_attempts');
  await pool.query('DELETE FROM webhook_queue');
  await pool.query('DELETE FROM webhook_deliveries');
}
