import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Refund } from '#domain';
import { RefundFlow } from './refund-flow';

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
  constructor(@Inject(RefundFlow) private readonly flow: RefundFlow) {}

  execute(command: AdvanceRefund): Promise<Refund> {
    return this.flow.advance(command.invoiceId, command.refundId, command.now);
  }
}
