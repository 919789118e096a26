import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Invoice } from '#domain';
import { InvoiceService } from './invoice-service';

/** An open invoice whose expiresAt has passed on the gateway clock expires (sent by the expiry worker). */
export class ExpireInvoice extends Command<Invoice> {
  constructor(
    readonly invoiceId: string,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(ExpireInvoice)
export class ExpireInvoiceHandler implements ICommandHandler<ExpireInvoice> {
  constructor(@Inject(InvoiceService) private readonly invoices: InvoiceService) {}

  execute(command: ExpireInvoice): Promise<Invoice> {
    return this.invoices.expire(command.invoiceId, command.now);
  }
}
