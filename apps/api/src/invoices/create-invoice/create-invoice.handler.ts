import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Invoice, InvoiceRequest, Mode } from '#domain';
import type { Project } from '../merchants';
import { InvoiceService } from './invoice-service';

/**
 * POST /v1/invoices: an invoice for the project's orderId. The id derives from the
 * orderId, so a repeat with the same parameters gets the invoice back (created false)
 * and one with other parameters is refused (409 order_id_conflict).
 */
export class CreateInvoice extends Command<{ created: boolean; invoice: Invoice }> {
  constructor(
    readonly project: Project,
    readonly mode: Mode,
    readonly request: InvoiceRequest,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(CreateInvoice)
export class CreateInvoiceHandler implements ICommandHandler<CreateInvoice> {
  constructor(@Inject(InvoiceService) private readonly invoices: InvoiceService) {}

  execute(command: CreateInvoice): Promise<{ created: boolean; invoice: Invoice }> {
    return this.invoices.create(command.project, command.mode, command.request, command.now);
  }
}
