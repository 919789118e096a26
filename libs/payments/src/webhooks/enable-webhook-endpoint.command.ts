import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { READ_MODELS } from '../payments.tokens';
import { resendFailedDeliveries } from './webhook-dispatcher';

/**
 * The operator re-enables a project's endpoint (one not disabled keeps its failing streak) and
 * resends its failed deliveries: how many; null for an unknown project.
 */
export class EnableWebhookEndpoint extends Command<number | null> {
  constructor(
    /** Lower case. */
    readonly projectId: string,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(EnableWebhookEndpoint)
export class EnableWebhookEndpointHandler implements ICommandHandler<EnableWebhookEndpoint> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  /**
   * The endpoint enabled in the transaction of the first batch of the resend, so a failure
   * there leaves it disabled and a 5xx means nothing was written; a failure of a later batch
   * (or a COMMIT's answer lost) is the marked 503: it may have been done (resendFailedDeliveries).
   */
  async execute({ projectId, now }: EnableWebhookEndpoint): Promise<number | null> {
    return resendFailedDeliveries(this.pool, projectId, now, {
      // Only a disabled endpoint is re-enabled now: one still on keeps its failing streak (endpoint-health.ts), so
      // pressing enable on a failing endpoint does not put off its disabling.
      first: async (tx) => {
        await tx.query(
          `UPDATE projects SET webhook_enabled_at = CASE WHEN webhook_disabled_at IS NULL THEN webhook_enabled_at ELSE $2 END,
                               webhook_disabled_at = NULL WHERE id = $1`,
          [projectId, now],
        );
      },
    });
  }
}
