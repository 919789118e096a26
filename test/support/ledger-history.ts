/**
 * A ledger's history written straight into an event store, for tests that need a
 * ledger longer than the window of recent causes without paying for thousands of
 * LedgerBook commands (each a load, a decision and an append): the requests are
 * decided in memory by the same pure decider, with the exact answer for causes
 * older than the window (this history knows every cause it posted), and the
 * entries appended in a few large appends, with the entry ids, metadata and expected
 * revisions LedgerBook would have used. The stream is what the book would have
 * written; it is not a way around the book in the code under test.
 */
import { Refusal } from '#domain';
import type { EventStore, JsonObject } from '#event-store';
import {
  causeOf,
  evolve,
  initialLedgerState,
  LedgerCommand,
  ledgerDecider,
  LedgerEvent,
  LedgerId,
  ledgerEntryId,
  LedgerState,
  ledgerStreamName,
  needsCauseLookup,
} from '#ledger';
import type { LedgerRequest } from '#payments/ledger';

/** Requests for `n` payments of fresh invoices straight to available (ids from `prefix`). */
export const freshPayments = (prefix: string, n: number, at: () => string): LedgerRequest[] =>
  Array.from({ length: n }, (_, i) => ({ type: 'RecordPayment', invoiceId: `${prefix}-${i}`, netAmount: 100, feeAmount: 1, releaseAt: null, at: at() }));

/**
 * Decides `requests` after the ledger's current entries (`after`, default none) and
 * appends the entries they post, in appends of at most 500. A request the ledger
 * refuses is a mistake of the test: it throws.
 */
export async function appendLedgerHistory(
  store: EventStore,
  ledger: LedgerId,
  requests: readonly LedgerRequest[],
  after: readonly LedgerEvent[] = [],
): Promise<{ readonly events: LedgerEvent[]; readonly state: LedgerState }> {
  let state = after.reduce(evolve, initialLedgerState());
  const posted = new Set(after.map((e) => e.data.cause));
  const events: LedgerEvent[] = [];
  for (const request of requests) {
    const cause = causeOf(request as LedgerCommand);
    let command = { ...request, entryId: ledgerEntryId(ledger, cause) } as LedgerCommand;
    if (needsCauseLookup(command, state)) command = { ...command, postedBeforeWindow: posted.has(cause) };
    const decision = ledgerDecider.decide(command, state);
    if (decision instanceof Refusal) throw new Error(`${cause} refused while writing a history: ${decision.code}`);
    for (const event of decision) {
      events.push(event);
      posted.add(event.data.cause);
      state = evolve(state, event);
    }
  }
  const streamName = ledgerStreamName(ledger);
  let revision = BigInt(after.length) - 1n;
  for (let i = 0; i < events.length; i += 500) {
    const chunk = events.slice(i, i + 500);
    await store.appendToStream(
      streamName,
      chunk.map((e) => ({
        id: e.data.entryId,
        type: e.type,
        data: e.data as unknown as JsonObject,
        metadata: { accountId: ledger.accountId, mode: ledger.mode },
      })),
      { expectedRevision: revision < 0n ? 'no_stream' : revision },
    );
    revision += BigInt(chunk.length);
  }
  return { events, state };
}
