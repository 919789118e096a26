import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { resendDelivery, resendFailedDeliveries } from './webhook-dispatcher';
import { READ_MODELS } from '../payments.tokens';

/** The operator sends a delivery again now (same id and body), with a fresh retry schedule; null for an unknown delivery. */
export class ResendWebhookDelivery extends Command<{ id: string; nextAttemptAt: Date } | null> {
  constructor(
    /** Lower case. */
    readonly deliveryId: string,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(ResendWebhookDelivery)
export class ResendWebhookDeliveryHandler implements ICommandHandler<ResendWebhookDelivery> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  execute(command: ResendWebhookDelivery): Promise<{ id: string; nextAttemptAt: Date } | null> {
    return resendDelivery(this.pool, command.deliveryId, command.now);
  }
}

/** The operator sends every failed delivery of a project again now, each with a fresh retry schedule: how many; null for an unknown project. */
export class ResendFailedWebhookDeliveries extends Command<number | null> {
  constructor(
    /** Lower case. */
    readonly projectId: string,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(ResendFailedWebhookDeliveries)
export class ResendFailedWebhookDeliveriesHandler implements ICommandHandler<ResendFailedWebhookDeliveries> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  execute(command: ResendFailedWebhookDeliveries): Promise<number | null> {
    return resendFailedDeliveries(this.pool, command.projectId, command.now);
  }
}
