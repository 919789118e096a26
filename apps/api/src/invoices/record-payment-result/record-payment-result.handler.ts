import { Refusal } from '#domain';
import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { EventStore } from '#event-store';
import type { Invoice, MethodCode } from '#domain';
import { EVENT_STORE } from '#payments';
import { findInvoice, paymentResultDated, runInvoiceCommand } from '#payments/invoices';
import { Registry } from '#payments/merchants';
import type { Clock } from '#platform/clock';
import { CLOCK_TOKEN } from '../../http/tokens';

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
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(Registry) private readonly registry: Registry,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  async execute({ invoiceId, outcome, method, now }: RecordPaymentResult): Promise<Invoice> {
    const invoice = await findInvoice(this.store, invoiceId);
    if (!invoice) throw new Refusal('invoice_not_found', 'Счёт не найден');
    // The hold is the project's at the time of payment.
    const project = await this.registry.project(invoice.created.projectId);
    return runInvoiceCommand(
      this.store,
      invoiceId,
      {
        type: 'RecordPaymentResult',
        outcome,
        method,
        at: now.toISOString(),
        holdHours: project?.holdHours ?? 24,
        reason: outcome === 'failed' ? 'declined by the acquirer' : undefined,
      },
      paymentResultDated(this.clock),
    );
  }
}
