import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { EventStore } from '#event-store';
import { handleCommand, loadState } from '#event-store';
import {
  Invoice,
  invoiceDecider,
  InvoiceEvent,
  InvoiceRequest,
  InvoiceState,
  invoiceStreamName,
  Mode,
  planInvoice,
  sameInvoiceParameters,
  Refusal,
} from '#domain';
import { EVENT_STORE } from '#payments';
import { invoiceIdFor, invoiceIn } from '#payments/invoices';
import { methodsOf, type Project } from '#payments/merchants';

/**
 * POST /v1/invoices: an invoice for the project's orderId. The id derives from the
 * orderId (UUID v5), so a repeat, or 50 at once, lands on the same stream: exactly one
 * creates it; the others get it back (created false, 200) when their parameters agree,
 * or 409 order_id_conflict when not.
 */
export class CreateInvoice extends Command<{ created: boolean; invoice: Invoice }> {
  constructor(
    readonly project: Project,
    readonly mode: Mode,
    readonly request: InvoiceRequest,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(CreateInvoice)
export class CreateInvoiceHandler implements ICommandHandler<CreateInvoice> {
  constructor(@Inject(EVENT_STORE) private readonly store: EventStore) {}

  async execute({ project, mode, request, now }: CreateInvoice): Promise<{ created: boolean; invoice: Invoice }> {
    const invoiceId = invoiceIdFor(project.idNamespace, mode, request.orderId);
    const stream = invoiceStreamName(invoiceId);
    // A live key of a project not active creates no invoice; the invoice of an orderId created before is still its repeat.
    if (mode === 'live' && project.status !== 'active') {
      const existing = await loadState<InvoiceState, InvoiceEvent>(this.store, stream, invoiceDecider);
      if (existing.state.status !== 'none') return repeat(existing.state, request, project);
      throw new Refusal('project_not_active', `Проект не активен (статус ${project.status}): боевой ключ не может создавать счета`);
    }
    // A repeat is compared with the stored invoice, not planned again: the project's
    // settings may have changed since, and the first answer still stands.
    let planned: ReturnType<typeof planInvoice>;
    try {
      const terms = { projectId: project.id, accountId: project.accountId, mode, methods: methodsOf(project), customerFeeShare: project.customerFeeShare };
      planned = planInvoice(invoiceId, request, terms, now);
    } catch (planError) {
      const existing = await loadState<InvoiceState, InvoiceEvent>(this.store, stream, invoiceDecider);
      if (existing.state.status !== 'none') return repeat(existing.state, request, project);
      throw planError;
    }
    // A new orderId is the common case: decided and appended expecting no stream, in one round trip.
    const result = await handleCommand(this.store, stream, invoiceDecider, { type: 'CreateInvoice', data: planned }, { expectNoStream: true });
    if (result.ok) return { created: true, invoice: invoiceIn(result.state) };
    if (result.state.status !== 'none') return repeat(result.state, request, project);
    throw result.failure;
  }
}

function repeat(existing: Invoice, request: InvoiceRequest, project: Project): { created: boolean; invoice: Invoice } {
  if (sameInvoiceParameters(existing.created, request, project)) return { created: false, invoice: existing };
  throw new Refusal(
    'order_id_conflict',
    `orderId ${request.orderId} уже использован счётом с другими параметрами (сумма, способ оплаты, customerFeePct)`,
    'orderId',
  );
}
