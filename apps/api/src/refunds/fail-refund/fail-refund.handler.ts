import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Refund } from '#domain';
import { RefundService } from './refund-service';

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
  constructor(@Inject(RefundService) private readonly refunds: RefundService) {}

  execute(command: FailRefund): Promise<Refund> {
    return this.refunds.fail(command.refundId, command.reason, command.now);
  }
}
