import type { Projection } from '../../projections/src';
import { invoicesProjection } from './invoices.projection';
import { ledgerProjection } from './ledger.projection';
import { streamCatalogProjection } from './stream-catalog.projection';
import { refundsProjection } from './refunds.projection';
import { payoutsProjection } from './payouts.projection';

export * from './stream-catalog.projection';
export * from './ledger.projection';
export * from './invoices.projection';
export * from './refunds.projection';
export * from './payouts.projection';
export * from './ledger-cause-index';

/** Every projection the projector runs, by name. */
export const allProjections: readonly Projection[] = [
  streamCatalogProjection,
  ledgerProjection,
  invoicesProjection,
  refundsProjection,
  payoutsProjection,
];
export * from './checksums';
