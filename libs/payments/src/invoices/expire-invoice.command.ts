import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { EventStore } from '#event-store';
import type { Invoice } from '#domain';
import { EVENT_STORE } from '../payments.tokens';
import { runInvoiceCommand } from './invoice-stream';

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
  constructor(@Inject(EVENT_STORE) private readonly store: EventStore) {}

  execute(command: ExpireInvoice): Promise<Invoice> {
    return runInvoiceCommand(this.store, command.invoiceId, { type: 'ExpireInvoice', at: command.now.toISOString() });
  }
}
