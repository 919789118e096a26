import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { EventStore } from '#event-store';
import { handleCommand } from '#event-store';
import { invoiceDecider, invoiceStreamName, isPaid, isUuid, Mode, Refund, Refusal } from '#domain';
import type { Kopecks } from '#ledger';
import { EVENT_STORE } from '#payments';
import type { Project } from '#payments/merchants';
import type { KeyedRequest } from '#payments/idempotency';
import { grantedRefund, newRefundId, RefundFlow, refundIdFor } from '#payments/refunds';
import { decidedNow, RefusalOutcomeUnknownError, tellLeftToRecovery } from '#payments/flows';
import type { Clock } from '#platform/clock';
import { CLOCK_TOKEN } from '../../http/tokens';

/** POST /v1/invoices/{id}/refund: the invoice grants the amount, the ledger reserves it, the refund is created pending (or 422 insufficient_balance). */
export class RefundInvoice extends Command<Refund> {
  constructor(
    readonly project: Project,
    readonly mode: Mode,
    readonly invoiceId: string,
    /** Null refunds the whole unrefunded remainder. */
    readonly amount: Kopecks | null,
    readonly now: Date,
    /** The request under an Idempotency-Key: it names the refund, so a retry reaches the same one. */
    readonly keyed: KeyedRequest | null = null,
  ) {
    super();
  }
}

const invoiceNotFound = () => new Refusal('invoice_not_found', 'Счёт не найден');

/**
 * Step 1 of the refund flow (see RefundFlow), then the flow's own steps. The grant is
 * the request's first commit: once written, the refund exists and the answer is the
 * refund (202) however the next steps fail; a 5xx comes only from before it, when
 * nothing was written. A keyed request names its refund, so a retry reaches the same
 * refund through the same steps (the invoice grants a known refund id once).
 */
@CommandHandler(RefundInvoice)
export class RefundInvoiceHandler implements ICommandHandler<RefundInvoice> {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(RefundFlow) private readonly flow: RefundFlow,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  async execute({ project, mode, invoiceId, amount, now, keyed }: RefundInvoice): Promise<Refund> {
    if (!isUuid(invoiceId)) throw invoiceNotFound();
    const id = invoiceId.toLowerCase();
    const refundId = keyed === null ? newRefundId() : refundIdFor(keyed);
    const granted = await handleCommand(
      this.store,
      invoiceStreamName(id),
      invoiceDecider,
      { type: 'RequestRefund', refundId, amount, at: now.toISOString() },
      {
        // The refund's request, dated by its grant: a report of an instant after it holds it.
        dated: decidedNow(this.clock),
        // Another project's or mode's invoice is not found, and nothing is written to it.
        prepare: async (command, loaded) => {
          const s = loaded.state;
          if (s.status === 'none' || s.created.projectId !== project.id || s.created.mode !== mode) throw invoiceNotFound();
          return command;
        },
      },
    );
    if (!granted.ok) throw granted.failure;
    // Granted: the refund exists. Its own answer (the refund, or the refusal it could
    // record) when the next steps go through; otherwise the refund as granted, pending.
    // The flow's steps (due holds released, the reservation) go by the request's date: dated again if it was late.
    const requestedAt = granted.events.find((e) => e.type === 'InvoiceRefundRequested')?.data.at;
    const decidedAt = requestedAt === undefined ? now : new Date(requestedAt);
    try {
      return await this.flow.advance(id, refundId, decidedAt, granted.events.length > 0 ? 'answering' : 'finishing', granted.state);
    } catch (error) {
      // A refusal, or one whose recording may have committed (never shown): not "pending".
      if (error instanceof Refusal || error instanceof RefusalOutcomeUnknownError) throw error;
      tellLeftToRecovery(this.flow.observer, 'refund', refundId, error);
      if (!isPaid(granted.state)) throw error;
      return grantedRefund(granted.state, refundId, this.flow.processingSeconds);
    }
  }
}
