import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Mode, Refund } from '#domain';
import type { KeyedRequest } from '../idempotency/keyed-request';
import type { Kopecks } from '#ledger';
import type { Project } from '../merchants';
import { RefundService } from './refund-service';

/** POST /v1/invoices/{id}/refund: the invoice grants the amount, the ledger reserves it, the refund is created pending (or 422 insufficient_balance). */
export class RefundInvoice extends Command<Refund> {
  constructor(
    readonly project: Project,
    readonly mode: Mode,
    readonly invoiceId: string,
    /** Null refunds the whole unrefunded remainder. */
    readonly amount: Kopecks | null,
    readonly now: Date,
    /** The request under an Idempotency-Key: it names the refund, so a retry reaches the same one. */
    readonly keyed: KeyedRequest | null = null,
  ) {
    super();
  }
}

@CommandHandler(RefundInvoice)
export class RefundInvoiceHandler implements ICommandHandler<RefundInvoice> {
  constructor(@Inject(RefundService) private readonly refunds: RefundService) {}

  execute(command: RefundInvoice): Promise<Refund> {
    return this.refunds.request(command.project, command.mode, command.invoiceId, command.amount, command.now, command.keyed);
  }
}
