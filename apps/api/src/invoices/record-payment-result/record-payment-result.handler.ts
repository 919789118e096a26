import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Invoice, MethodCode } from '#domain';
import { InvoiceService } from './invoice-service';

/** The acquirer's answer for an invoice (the operator API, or the sandbox buttons of the payment page). */
export class RecordPaymentResult extends Command<Invoice> {
  constructor(
    readonly invoiceId: string,
    readonly outcome: 'paid' | 'failed',
    readonly method: MethodCode | null,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(RecordPaymentResult)
export class RecordPaymentResultHandler implements ICommandHandler<RecordPaymentResult> {
  constructor(@Inject(InvoiceService) private readonly invoices: InvoiceService) {}

  execute(command: RecordPaymentResult): Promise<Invoice> {
    return this.invoices.recordPaymentResult(command.invoiceId, command.outcome, command.method, command.now);
  }
}
