import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import type { KeyedRequest } from '../idempotency/keyed-request';
import { PayoutRequest, PayoutService } from './payout-service';

/** POST /v1/payouts (live keys): the payout recorded under its id, the amount reserved on the live ledger, pending (or its refusal). */
export class CreatePayout extends Command<{ created: boolean; payout: Payout }> {
  constructor(
    readonly accountId: string,
    readonly projectId: string,
    readonly request: PayoutRequest,
    readonly now: Date,
    /** The request under an Idempotency-Key (no orderId): it claims one payout id, so a retry reaches that payout. */
    readonly keyed: KeyedRequest | null = null,
  ) {
    super();
  }
}

@CommandHandler(CreatePayout)
export class CreatePayoutHandler implements ICommandHandler<CreatePayout> {
  constructor(@Inject(PayoutService) private readonly payouts: PayoutService) {}

  execute(command: CreatePayout): Promise<{ created: boolean; payout: Payout }> {
    return this.payouts.create(command.accountId, command.projectId, command.request, command.now, command.keyed);
  }
}
