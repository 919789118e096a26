import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Mode, Refund } from '#domain';
import type { Project } from '../merchants';
import { RefundService } from './refund-service';

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
  constructor(@Inject(RefundService) private readonly refunds: RefundService) {}

  execute(query: GetRefund): Promise<Refund> {
    return this.refunds.getFor(query.project, query.mode, query.refundId);
  }
}
