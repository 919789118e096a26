import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Invoice, MethodCode } from '#domain';
import { InvoiceService } from './invoice-service';

/** The buyer picks a payment method on the payment page (created → pending). */
export class ChooseInvoiceMethod extends Command<Invoice> {
  constructor(
    readonly invoiceId: string,
    readonly method: MethodCode,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(ChooseInvoiceMethod)
export class ChooseInvoiceMethodHandler implements ICommandHandler<ChooseInvoiceMethod> {
  constructor(@Inject(InvoiceService) private readonly invoices: InvoiceService) {}

  execute(command: ChooseInvoiceMethod): Promise<Invoice> {
    return this.invoices.chooseMethod(command.invoiceId, command.method, command.now);
  }
}
