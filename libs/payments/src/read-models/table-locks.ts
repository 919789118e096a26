import type { PoolClient } from 'pg';
import type { Projection } from '#event-store/projections';
import { invoicesProjection } from '../invoices/invoices.read-model';
import { ledgerProjection } from '../ledger/ledger.read-model';
import { payoutsProjection } from '../payouts/payouts.read-model';
import { refundsProjection } from '../refunds/refunds.read-model';
import { streamCatalogProjection } from '../streams/stream-catalog.read-model';

/** Every projection the projector runs, by name. */
export const allProjections: readonly Projection[] = [streamCatalogProjection, ledgerProjection, invoicesProjection, refundsProjection, payoutsProjection];

/** Every table the read-model projections write (what projections:rebuild empties and rebuilds), in allProjections' order. */
export const READ_MODEL_TABLES: readonly string[] = allProjections.flatMap((p) => p.tables);

/**
 * The read models named, in allProjections' order whatever the order named (every one
 * when none is): a reset then takes their tables in the order every snapshot reader
 * locks them (lockReadModelTables).
 */
export const projectionsNamed = (names: readonly string[]): Projection[] => allProjections.filter((p) => names.length === 0 || names.includes(p.name));

export const quoteIdentifier = (identifier: string): string => `"${identifier.replace(/"/g, '""')}"`;

/**
 * ACCESS SHARE on `tables`, as a transaction's first statement (LOCK takes no snapshot):
 * a rebuild's TRUNCATE, which is not MVCC-safe, has then committed before the snapshot
 * or waits for the transaction's end, instead of making a table read after it read
 * empty beside what was read before it. In READ_MODEL_TABLES' order, the order a reset
 * truncates them in (projections:rebuild resets the models in allProjections' order): a
 * reader queued behind a TRUNCATE holds no table the TRUNCATE still needs.
 */
export async function lockReadModelTables(client: Pick<PoolClient, 'query'>, tables: readonly string[]): Promise<void> {
  const rank = (t: string) => (READ_MODEL_TABLES.includes(t) ? READ_MODEL_TABLES.indexOf(t) : READ_MODEL_TABLES.length);
  const ordered = [...tables].sort((a, b) => rank(a) - rank(b));
  if (ordered.length > 0) await client.query(`LOCK TABLE ${ordered.map(quoteIdentifier).join(', ')} IN ACCESS SHARE MODE`);
}
