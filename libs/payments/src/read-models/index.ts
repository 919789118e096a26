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

/** Every projection the projector runs, by name. */
export const allProjections: readonly Projection[] = [streamCatalogProjection, ledgerProjection, invoicesProjection, refundsProjection, payoutsProjection];
export * from './checksums';
export * from './folded-row';
