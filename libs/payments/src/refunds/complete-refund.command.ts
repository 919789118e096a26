import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Refund } from '#domain';
import { RefundService } from './refund-service';

/** The sandbox processor's success, REFUND_PROCESSING_SECONDS after the refund was created (a refund failed meanwhile stays failed). */
export class CompleteRefund extends Command<Refund> {
  constructor(
    readonly refundId: string,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(CompleteRefund)
export class CompleteRefundHandler implements ICommandHandler<CompleteRefund> {
  constructor(@Inject(RefundService) private readonly refunds: RefundService) {}

  execute(command: CompleteRefund): Promise<Refund> {
    return this.refunds.complete(command.refundId, command.now);
  }
}
