import type { EventStore } from '#event-store';
import { randomUUID } from 'node:crypto';
import { handleCommand, loadState, WrongExpectedRevisionError } from '#event-store';
import {
  Invoice,
  InvoiceCommand,
  invoiceDecider,
  InvoiceError,
  InvoiceEvent,
  isUuid,
  InvoiceRequest,
  InvoiceState,
  invoiceStreamName,
  MethodCode,
  Mode,
  planInvoice,
  sameInvoiceParameters,
} from '#domain';
import { methodsOf, Project, Registry } from '../merchants';
import { invoiceIdFor } from './invoice-id';

/** The invoice a decision left (a decision on no invoice is refused before, so there is one). */
function invoiceIn(state: InvoiceState): Invoice {
  if (state.status === 'none') throw new Error('no invoice in this stream');
  return state;
}

/** An answer the merchant API maps to the spec's error (status, code, param). */
export class PaymentsError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = 'PaymentsError';
  }
}

export const fromInvoiceError = (e: InvoiceError): PaymentsError => {
  switch (e.code) {
    case 'invoice_not_found':
      return new PaymentsError(404, 'invoice_not_found', e.message);
    case 'conflict':
      return new PaymentsError(409, 'conflict', e.message);
    case 'method_unavailable':
      return new PaymentsError(422, 'method_unavailable', e.message, e.param);
    case 'validation':
      return new PaymentsError(400, 'validation', e.message, e.param);
    case 'refund_exceeds_amount':
      return new PaymentsError(422, 'refund_exceeds_amount', e.message, e.param);
  }
};

/**
 * The invoice commands: used by the merchant API, the operator API, the payment page
 * and the workers. Each loads the invoice's stream, decides with the pure decider,
 * and appends with the expected revision (retrying on a conflict).
 */
export class InvoiceService {
  constructor(
    private readonly store: EventStore,
    private readonly registry: Registry,
  ) {}

  /**
   * POST /invoices. The invoice id derives from the orderId, so a repeat (or 50 at
   * once) lands on the same stream: exactly one creates it; the others get it back
   * (200) when their parameters agree, or order_id_conflict (409) when not.
   */
  async create(project: Project, mode: Mode, request: InvoiceRequest, now: Date): Promise<{ created: boolean; invoice: Invoice }> {
    const invoiceId = invoiceIdFor(project.idNamespace, mode, request.orderId);
    const stream = invoiceStreamName(invoiceId);
    // A new orderId is the common case: plan and append straight away, expecting no
    // stream (one round trip). A repeat finds the stream taken and is then compared
    // with the stored invoice, not planned again: the project's settings may have
    // changed since, and the first answer still stands.
    let planned: ReturnType<typeof planInvoice>;
    try {
      planned = planInvoice(
        invoiceId,
        request,
        { projectId: project.id, accountId: project.accountId, mode, methods: methodsOf(project), customerFeeShare: project.customerFeeShare },
        now,
      );
    } catch (planError) {
      const existing = await loadState<InvoiceState, InvoiceEvent>(this.store, stream, invoiceDecider);
      if (existing.state.status !== 'none') return this.repeat(existing.state, request, project);
      throw planError;
    }
    const nothing = invoiceDecider.initialState();
    const decision = invoiceDecider.decide({ type: 'CreateInvoice', data: planned }, nothing) as InvoiceEvent[];
    try {
      await this.store.appendToStream(
        stream,
        decision.map((e) => ({ id: randomUUID(), type: e.type, data: e.data })),
        { expectedRevision: 'no_stream' },
      );
      return { created: true, invoice: invoiceIn(decision.reduce(invoiceDecider.evolve, nothing)) };
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      // The orderId was used before (a repeat, or a concurrent create that won).
      const stored = await loadState<InvoiceState, InvoiceEvent>(this.store, stream, invoiceDecider);
      return this.repeat(invoiceIn(stored.state), request, project);
    }
  }

  private repeat(existing: Invoice, request: InvoiceRequest, project: Project): { created: boolean; invoice: Invoice } {
    if (sameInvoiceParameters(existing.created, request, project)) return { created: false, invoice: existing };
    throw new PaymentsError(
      409,
      'order_id_conflict',
      `orderId ${request.orderId} уже использован счётом с другими параметрами (сумма, способ оплаты, customerFeePct)`,
      'orderId',
    );
  }

  /** The invoice as its stream says now (immediately consistent), or null. */
  async get(invoiceId: string): Promise<Invoice | null> {
    if (!isUuid(invoiceId)) return null;
    const loaded = await loadState<InvoiceState, InvoiceEvent>(this.store, invoiceStreamName(invoiceId.toLowerCase()), invoiceDecider);
    return loaded.state.status === 'none' ? null : loaded.state;
  }

  /** The invoice if this project and mode may see it; other projects and modes get 404. */
  async getFor(project: Project, mode: Mode, invoiceId: string): Promise<Invoice> {
    const invoice = await this.get(invoiceId);
    if (!invoice || invoice.created.projectId !== project.id || invoice.created.mode !== mode) {
      throw new PaymentsError(404, 'invoice_not_found', 'Счёт не найден');
    }
    return invoice;
  }

  async chooseMethod(invoiceId: string, method: MethodCode, now: Date): Promise<Invoice> {
    return this.run(invoiceId, { type: 'ChooseMethod', method, at: now.toISOString() });
  }

  /** The acquirer's answer (the operator API, or the sandbox buttons of the payment page). */
  async recordPaymentResult(invoiceId: string, outcome: 'paid' | 'failed', method: MethodCode | null, now: Date): Promise<Invoice> {
    const invoice = await this.get(invoiceId);
    if (!invoice) throw new PaymentsError(404, 'invoice_not_found', 'Счёт не найден');
    const project = await this.registry.project(invoice.created.projectId);
    return this.run(invoiceId, {
      type: 'RecordPaymentResult',
      outcome,
      method,
      at: now.toISOString(),
      holdHours: project?.holdHours ?? 24,
      reason: outcome === 'failed' ? 'declined by the acquirer' : undefined,
    });
  }

  /** A refund's outcome on its invoice: refunded (status, refundedAmount) or returned to the remainder. Idempotent. */
  async resolveRefund(invoiceId: string, refundId: string, outcome: 'succeeded' | 'failed', at: string): Promise<Invoice> {
    return this.run(invoiceId, { type: 'ResolveRefund', refundId, outcome, at });
  }

  async expire(invoiceId: string, now: Date): Promise<Invoice> {
    return this.run(invoiceId, { type: 'ExpireInvoice', at: now.toISOString() });
  }

  private async run(invoiceId: string, command: InvoiceCommand): Promise<Invoice> {
    if (!isUuid(invoiceId)) throw new PaymentsError(404, 'invoice_not_found', 'Счёт не найден');
    // A missing stream folds to a non-existent invoice, which the decider refuses (404).
    const result = await handleCommand(this.store, invoiceStreamName(invoiceId.toLowerCase()), invoiceDecider, command);
    if (!result.ok) throw fromInvoiceError(result.failure);
    return invoiceIn(result.state);
  }
}
