import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Refund } from '#domain';
import { RefundService } from './refund-service';

/** Takes a refund request left half-done (its API process died, or a later step failed after the 202) through the same steps: pending, or failed when the ledger refuses it. */
export class AdvanceRefund extends Command<Refund> {
  constructor(
    readonly invoiceId: string,
    readonly refundId: string,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(AdvanceRefund)
export class AdvanceRefundHandler implements ICommandHandler<AdvanceRefund> {
  constructor(@Inject(RefundService) private readonly refunds: RefundService) {}

  execute(command: AdvanceRefund): Promise<Refund> {
    return this.refunds.advance(command.invoiceId, command.refundId, command.now);
  }
}
