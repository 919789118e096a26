import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Refund } from '#domain';
import { RefundFlow, refundNotFound } from '#payments/refunds';

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

  /** A refund granted and not yet funded (shown pending) is funded first, as the recovery would; then it fails. */
  async execute({ refundId, reason, now }: FailRefund): Promise<Refund> {
    if ((await this.flow.finished(refundId, now)) === null) throw refundNotFound();
    return this.flow.run(refundId, { type: 'FailRefund', at: now.toISOString(), reason }, true);
  }
}
