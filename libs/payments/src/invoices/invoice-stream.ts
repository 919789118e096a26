import type { DatedByDecision, EventStore } from '#event-store';
import type { Clock } from '#platform/clock';
import { decidedNow } from '../flows/decided-now';
import { handleCommand, loadState } from '#event-store';
import { Invoice, InvoiceCommand, invoiceDecider, InvoiceEvent, InvoiceState, invoiceStreamName, isUuid, Mode, Refusal } from '#domain';
import type { Project } from '../merchants';

export const invoiceNotFound = () => new Refusal('invoice_not_found', 'Счёт не найден');

/** The invoice a decision left (a decision on no invoice is refused before, so there is one). */
export function invoiceIn(state: InvoiceState): Invoice {
  if (state.status === 'none') throw new Error('no invoice in this stream');
  return state;
}

/** The invoice as its stream says now (immediately consistent), or null. */
export async function findInvoice(store: EventStore, invoiceId: string): Promise<Invoice | null> {
  if (!isUuid(invoiceId)) return null;
  const loaded = await loadState<InvoiceState, InvoiceEvent>(store, invoiceStreamName(invoiceId.toLowerCase()), invoiceDecider);
  return loaded.state.status === 'none' ? null : loaded.state;
}

/** The invoice if this project and mode may see it; other projects and modes get 404. */
export async function invoiceOfProject(store: EventStore, project: Project, mode: Mode, invoiceId: string): Promise<Invoice> {
  const invoice = await findInvoice(store, invoiceId);
  if (!invoice || invoice.created.projectId !== project.id || invoice.created.mode !== mode) throw invoiceNotFound();
  return invoice;
}

/**
 * The acquirer's result dated by its decision (paidAt: the payment's entry is dated with it); dated again when
 * late, it keeps when it came (`receivedAt`), by which the invoice's expiry is judged: a result that came in time
 * is never refused as expired for a stall.
 */
export function paymentResultDated(clock: Clock): DatedByDecision<InvoiceCommand> {
  const byAt = decidedNow<InvoiceCommand>(clock);
  return {
    ...byAt,
    redate: (command, at) =>
      command.type === 'RecordPaymentResult' ? { ...command, receivedAt: command.receivedAt ?? command.at, at } : byAt.redate(command, at),
  };
}

/**
 * Load the invoice's stream, decide with the pure decider, append with the expected
 * revision (retrying on a conflict): the invoice it leaves, or the decider's refusal
 * as the API's error. A missing stream folds to no invoice, which the decider refuses (404).
 */
export async function runInvoiceCommand(
  store: EventStore,
  invoiceId: string,
  command: InvoiceCommand,
  dated?: DatedByDecision<InvoiceCommand>,
): Promise<Invoice> {
  if (!isUuid(invoiceId)) throw invoiceNotFound();
  const result = await handleCommand(store, invoiceStreamName(invoiceId.toLowerCase()), invoiceDecider, command, { dated });
  if (!result.ok) throw result.failure;
  return invoiceIn(result.state);
}
