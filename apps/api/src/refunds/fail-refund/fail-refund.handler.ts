import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Refund } from '#domain';
import { RefundFlow } from '#payments/refunds';

/** The bank refused the refund (operator API): failed, its amount back to available; 409 conflict once it succeeded. */
export class FailRefund extends Command<Refund> {
  constructor(
    readonly refundId: string,
    readonly reason: string,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(FailRefund)
export class FailRefundHandler implements ICommandHandler<FailRefund> {
  constructor(@Inject(RefundFlow) private readonly flow: RefundFlow) {}

  execute({ refundId, reason, now }: FailRefund): Promise<Refund> {
    return this.flow.run(refundId, { type: 'FailRefund', at: now.toISOString(), reason }, true);
  }
}
