import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Invoice, Mode } from '#domain';
import type { Project } from '../merchants';
import { InvoiceService } from './invoice-service';

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
  constructor(@Inject(InvoiceService) private readonly invoices: InvoiceService) {}

  execute(query: GetInvoice): Promise<Invoice> {
    return this.invoices.getFor(query.project, query.mode, query.invoiceId);
  }
}

/** Any invoice by its id, from its stream, or null (the payment page: whoever has the link). */
export class FindInvoice extends Query<Invoice | null> {
  constructor(readonly invoiceId: string) {
    super();
  }
}

@QueryHandler(FindInvoice)
export class FindInvoiceHandler implements IQueryHandler<FindInvoice> {
  constructor(@Inject(InvoiceService) private readonly invoices: InvoiceService) {}

  execute(query: FindInvoice): Promise<Invoice | null> {
    return this.invoices.get(query.invoiceId);
  }
}
