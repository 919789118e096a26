import type { Projection } from '#event-store/projections';
import type { Migration } from '#platform/database';
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

/**
 * Every emptying of a read-model table counted for its projection (projection_checkpoints.resets,
 * event-store:0012), in the emptying transaction. A table added to a read model later gets its
 * trigger in the migration that creates it (a test checks that each has one).
 */
export const readModelResetsCountedMigration: Migration = {
  id: 'payments:0056_read_model_resets_counted',
  sql: `
SET LOCAL lock_timeout = '5s';
CREATE OR REPLACE TRIGGER stream_catalog_reset_counted AFTER TRUNCATE ON stream_catalog FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('stream_catalog');
CREATE OR REPLACE TRIGGER ledger_postings_reset_counted AFTER TRUNCATE ON ledger_postings FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('ledger');
CREATE OR REPLACE TRIGGER ledger_entries_reset_counted AFTER TRUNCATE ON ledger_entries FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('ledger');
CREATE OR REPLACE TRIGGER ledger_balances_reset_counted AFTER TRUNCATE ON ledger_balances FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('ledger');
CREATE OR REPLACE TRIGGER ledger_open_holds_reset_counted AFTER TRUNCATE ON ledger_open_holds FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('ledger');
CREATE OR REPLACE TRIGGER invoices_reset_counted AFTER TRUNCATE ON invoices FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('invoices');
CREATE OR REPLACE TRIGGER refunds_reset_counted AFTER TRUNCATE ON refunds FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('refunds');
CREATE OR REPLACE TRIGGER payouts_reset_counted AFTER TRUNCATE ON payouts FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('payouts');
`,
};

export * from './table-locks';
export * from './checksums';
export * from './folded-row';
