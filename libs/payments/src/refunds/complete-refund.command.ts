import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Refund } from '#domain';
import { RefundFlow } from './refund-flow';

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
  constructor(@Inject(RefundFlow) private readonly flow: RefundFlow) {}

  execute(command: CompleteRefund): Promise<Refund> {
    return this.flow.run(command.refundId, { type: 'CompleteRefund', at: command.now.toISOString() });
  }
}
