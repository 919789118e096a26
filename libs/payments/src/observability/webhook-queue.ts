import type { Pool } from 'pg';
import type { Clock } from '#platform/clock';
import type { WebhookQueueDepth } from './gateway-metrics';

/**
 * The webhook queue as the dispatcher sees it, in one query over `webhook_queue` (the
 * pending deliveries alone: cost grows with the backlog, not with the history).
 * Delivered and failed rows are the history: their rates are webhook_attempts_total.
 */
export async function webhookQueueDepth(pool: Pool, clock: Clock): Promise<WebhookQueueDepth> {
  const result = await pool.query<{ pending: string; due: string }>(
    `SELECT count(*) AS pending, count(*) FILTER (WHERE next_attempt_at <= $1) AS due
     FROM webhook_queue`,
    [clock.now()],
  );
  return { pending: Number(result.rows[0]!.pending), due: Number(result.rows[0]!.due) };
}

/**
 * Projects whose webhook endpoint is disabled (endpoint health: every attempt failed for
 * 3 days): their deliveries are recorded failed, not sent, so the queue and the retry
 * rate say nothing of them. One count over `projects`, a table of a few rows per merchant.
 */
export async function disabledWebhookEndpoints(pool: Pool): Promise<number> {
  const result = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM projects WHERE webhook_disabled_at IS NOT NULL`);
  return result.rows[0]!.n;
}
