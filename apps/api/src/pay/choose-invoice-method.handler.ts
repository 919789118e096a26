import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { EventStore } from '#event-store';
import type { Invoice, MethodCode } from '#domain';
import { EVENT_STORE } from '#payments';
import { runInvoiceCommand } from '#payments/invoices';

/** The buyer chooses how to pay (the payment page): the invoice's amounts at that method's rate. */
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
  constructor(@Inject(EVENT_STORE) private readonly store: EventStore) {}

  execute({ invoiceId, method, now }: ChooseInvoiceMethod): Promise<Invoice> {
    return runInvoiceCommand(this.store, invoiceId, { type: 'ChooseMethod', method, at: now.toISOString() });
  }
}
