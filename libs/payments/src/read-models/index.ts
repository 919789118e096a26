import type { Projection } from '#event-store/projections';
import { invoicesProjection } from '../invoices/invoices.read-model';
import { ledgerProjection } from '../ledger/ledger.read-model';
import { streamCatalogProjection } from '../streams/stream-catalog.read-model';
import { refundsProjection } from '../refunds/refunds.read-model';
import { payoutsProjection } from '../payouts/payouts.read-model';

export * from '../streams/stream-catalog.read-model';
export * from '../ledger/ledger.read-model';
export * from '../invoices/invoices.read-model';
export * from '../refunds/refunds.read-model';
export * from '../payouts/payouts.read-model';
export * from '../ledger/ledger-cause-index';

/**
 * How `projections:rebuild` shares the read models between passes that run at once,
 * each on a thread of its own reading only its part of the log (decision 0095). A
 * rebuild is bound by the CPU of the thread that parses the log and hands it over, and
 * two such threads finish sooner than one: the ledger (the heaviest) with the stream
 * catalog, which is computed in SQL beside the pass when the log is in the same
 * database (else it reads every event, but none of its data); and invoices, refunds
 * and payouts, which want their own streams only.
 */
export const REBUILD_PASSES: readonly (readonly Projection[])[] = [
  [ledgerProjection, streamCatalogProjection],
  [invoicesProjection, refundsProjection, payoutsProjection],
];

/** The passes of a rebuild of `selected` (REBUILD_PASSES, those not selected left out; a projection no pass names joins the first). */
export function rebuildPassesOf(selected: readonly Projection[]): Projection[][] {
  const passes = REBUILD_PASSES.map((pass) => pass.filter((p) => selected.includes(p)));
  const unplaced = selected.filter((p) => !REBUILD_PASSES.some((pass) => pass.includes(p)));
  passes[0]!.push(...unplaced);
  return passes.filter((pass) => pass.length > 0);
}

export * from './table-locks';
export * from './checksums';
export * from './folded-row';
