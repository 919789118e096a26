import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { EventStore } from '#event-store';
import { EVENT_STORE, READ_MODELS } from '#payments';
import { findInvoice, InvoiceListFilter, InvoicePage, invoiceRowOf, listInvoices } from '#payments/invoices';
import { invoiceStatusAt } from '#domain';

/**
 * The project's invoices in a mode, newest first (order of arrival in the read model), a
 * page at a time. With an orderId, the one invoice it names (its id derives from it, as
 * the create's does), read from its stream: an invoice just answered 201 is in it at once.
 */
export class ListInvoices extends Query<InvoicePage> {
  constructor(
    readonly filter: InvoiceListFilter & { readonly at: Date },
    /** The id the filter's orderId names in this project and mode, or null without one. */
    readonly invoiceIdOfOrder: string | null,
  ) {
    super();
  }
}

@QueryHandler(ListInvoices)
export class ListInvoicesHandler implements IQueryHandler<ListInvoices> {
  constructor(
    @Inject(READ_MODELS) private readonly pool: Pool,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  async execute({ filter, invoiceIdOfOrder }: ListInvoices): Promise<InvoicePage> {
    if (invoiceIdOfOrder === null) return listInvoices(this.pool, filter);
    // A later page of one orderId's list (a cursor, which no first page of it gives) has nothing.
    const invoice = filter.before === null ? await findInvoice(this.store, invoiceIdOfOrder) : null;
    if (invoice === null) return { items: [], hasMore: false, lastSeq: null };
    const { projectId, mode, orderId, createdAt } = invoice.created;
    const created = Date.parse(createdAt);
    const listed =
      projectId === filter.projectId &&
      mode === filter.mode &&
      orderId === filter.orderId &&
      (filter.status === undefined || invoiceStatusAt(invoice, filter.at.toISOString()) === filter.status) &&
      (filter.from === undefined || created >= filter.from.getTime()) &&
      (filter.to === undefined || created < filter.to.getTime());
    return { items: listed ? [invoiceRowOf(invoice)] : [], hasMore: false, lastSeq: null };
  }
}
