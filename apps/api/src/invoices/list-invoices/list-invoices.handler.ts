import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { READ_MODELS } from '#payments';
import { InvoiceListFilter, InvoicePage, listInvoices } from '#payments/invoices';

/** The project's invoices in a mode, newest first (order of arrival in the read model), a page at a time. */
export class ListInvoices extends Query<InvoicePage> {
  constructor(readonly filter: InvoiceListFilter) {
    super();
  }
}

@QueryHandler(ListInvoices)
export class ListInvoicesHandler implements IQueryHandler<ListInvoices> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  execute(query: ListInvoices): Promise<InvoicePage> {
    return listInvoices(this.pool, query.filter);
  }
}
