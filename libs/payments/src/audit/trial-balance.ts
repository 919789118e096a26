import type { EventStore, Position } from '#event-store';
import { LEDGER_CATEGORY, LedgerEntryPostedData, ledgerIdFromStream, TrialBalance, TrialBalanceFold } from '#ledger';

/** Events handed over per batch while folding the log. */
const BATCH = 2_000;

/**
 * The trial balance as of an instant, rebuilt from the event log: every ledger entry
 * of the log that occurred at or before `asOf` (decisions carry their own time, so the
 * whole log is read, not cut at the first later entry), folded per ledger and account.
 * Memory grows with the number of ledgers, not of entries.
 */
export async function trialBalanceFromLog(store: EventStore, asOf: Date): Promise<TrialBalance & { readonly logPosition: Position | null }> {
  const fold = new TrialBalanceFold();
  const limit = asOf.getTime();
  let logPosition: Position | null = null;
  const subscription = store.subscribeToAll({
    filter: { streamNamePrefixes: [`${LEDGER_CATEGORY}-`], eventTypePrefixes: ['LedgerEntryPosted'] },
    maxBatchSize: BATCH,
  });
  try {
    for await (const batch of subscription) {
      for (const event of batch.events) {
        if (event.type !== 'LedgerEntryPosted') continue;
        const ledger = ledgerIdFromStream(event.streamName);
        const data = event.data as unknown as LedgerEntryPostedData;
        if (!ledger || Date.parse(data.occurredAt) > limit) continue;
        fold.apply(ledger, data.postings);
      }
      logPosition = batch.checkpoint;
      if (batch.caughtUp) break;
    }
  } finally {
    await subscription.unsubscribe();
  }
  return { ...fold.result(), logPosition };
}
