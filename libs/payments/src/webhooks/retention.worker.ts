import type { Pool } from 'pg';
import { sweepAccessMarks } from '../access';
import type { Clock } from '#platform/clock';
import { sweepWebhookHistory } from './webhook-retention';

/**
 * The retention sweeper (every projector, safe to run in several): finished webhook
 * deliveries and their attempts after WEBHOOK_RETENTION_DAYS, and the access marks
 * (used signatures after their 10-minute window, rate windows, poll marks), on the
 * gateway clock. Answers the deliveries deleted (a full batch: more are waiting).
 */
export function sweepRetention(pool: Pool, clock: Clock, webhookRetentionDays: number): () => Promise<number> {
  return async () => {
    const now = clock.now();
    await sweepAccessMarks(pool, now);
    return sweepWebhookHistory(pool, now, webhookRetentionDays);
  };
}
