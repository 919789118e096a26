import type { Pool } from 'pg';
import { sweepAccessMarks } from '../access';
import type { Clock } from '#platform/clock';
import { retentionHorizon, sweepWebhookHistory } from './webhook-retention';
import { sweepMerchantEvents } from '../events/merchant-events';

/**
 * The retention sweeper (every projector, safe to run in several): the merchant's
 * events and the finished webhook deliveries with their attempts after
 * WEBHOOK_RETENTION_DAYS, and the access marks
 * (used signatures after their 10-minute window, rate windows, poll marks), on the
 * gateway clock. Answers the most rows deleted of one kind (a full batch: more are waiting).
 */
export function sweepRetention(pool: Pool, clock: Clock, webhookRetentionDays: number): () => Promise<number> {
  return async () => {
    const now = clock.now();
    await sweepAccessMarks(pool, now);
    const events = await sweepMerchantEvents(pool, retentionHorizon(now, webhookRetentionDays));
    return Math.max(events, await sweepWebhookHistory(pool, now, webhookRetentionDays));
  };
}
