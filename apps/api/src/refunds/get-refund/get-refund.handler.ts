import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Mode, Refund } from '#domain';
import type { Project } from '#payments/merchants';
import { RefundFlow, refundNotFound } from '#payments/refunds';

/** One refund, from its own stream; unknown or another project's or mode's: 404 invoice_not_found (as the spec says). */
export class GetRefund extends Query<Refund> {
  constructor(
    readonly project: Project,
    readonly mode: Mode,
    readonly refundId: string,
  ) {
    super();
  }
}

@QueryHandler(GetRefund)
export class GetRefundHandler implements IQueryHandler<GetRefund> {
  constructor(@Inject(RefundFlow) private readonly flow: RefundFlow) {}

  /** A refund granted but not yet funded (answered 202 before the ledger decided) is shown pending, as its answer said. */
  async execute({ project, mode, refundId }: GetRefund): Promise<Refund> {
    const refund = (await this.flow.find(refundId)) ?? (await this.flow.granted(refundId));
    if (!refund || refund.created.projectId !== project.id || refund.created.mode !== mode) throw refundNotFound();
    return refund;
  }
}
