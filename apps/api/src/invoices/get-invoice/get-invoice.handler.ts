import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { EventStore } from '#event-store';
import type { Invoice, Mode } from '#domain';
import { EVENT_STORE } from '#payments';
import { invoiceOfProject } from '#payments/invoices';
import type { Project } from '#payments/merchants';

/**
 * One invoice of the project and mode, from its own stream (immediately consistent:
 * what the merchant just wrote is there); another project's or mode's: 404 invoice_not_found.
 */
export class GetInvoice extends Query<Invoice> {
  constructor(
    readonly project: Project,
    readonly mode: Mode,
    readonly invoiceId: string,
  ) {
    super();
  }
}

@QueryHandler(GetInvoice)
export class GetInvoiceHandler implements IQueryHandler<GetInvoice> {
  constructor(@Inject(EVENT_STORE) private readonly store: EventStore) {}

  execute(query: GetInvoice): Promise<Invoice> {
    return invoiceOfProject(this.store, query.project, query.mode, query.invoiceId);
  }
}
