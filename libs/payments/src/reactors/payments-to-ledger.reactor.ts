import type { CommandBus } from '@nestjs/cqrs';
import type { AllFilter, RecordedEvent } from '#event-store';
import { INVOICE_CATEGORY, InvoiceEvent } from '#domain';
import { RecordPayment } from '../ledger/record-payment.command';
import type { Reactor } from '#event-store/projections';

/**
 * Every InvoicePaid in the log is recorded in the merchant's ledger (net to pending
 * until availableAt, or to available without a hold; the fee to fees), by the
 * RecordPayment command. It follows the log from its own checkpoint, and the ledger
 * posts once per cause (`payment:<invoiceId>`), so a crash, a restart or a replay
 * never posts twice and never misses one.
 */
export const PAYMENTS_TO_LEDGER = 'payments_to_ledger';

export const PAYMENTS_TO_LEDGER_FILTER: AllFilter = { streamNamePrefixes: [`${INVOICE_CATEGORY}-`], eventTypePrefixes: ['InvoicePaid'] };

export function paymentsToLedger(commands: CommandBus): Reactor {
  return {
    name: PAYMENTS_TO_LEDGER,
    filter: PAYMENTS_TO_LEDGER_FILTER,
    async react(events: readonly RecordedEvent[]) {
      for (const recorded of events) {
        const event = { type: recorded.type, data: recorded.data } as unknown as InvoiceEvent;
        if (event.type !== 'InvoicePaid') continue;
        const paid = event.data;
        await commands.execute(
          new RecordPayment({ accountId: paid.accountId, mode: paid.mode }, paid.invoiceId, paid.netAmount, paid.feeAmount, paid.availableAt, paid.paidAt),
        );
      }
    },
  };
}
