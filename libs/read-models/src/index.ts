import type { Projection } from '../../projections/src';
import { ledgerProjection } from './ledger.projection';
import { streamCatalogProjection } from './stream-catalog.projection';

export * from './stream-catalog.projection';
export * from './ledger.projection';

/** Every projection the projector runs, by name. */
export const allProjections: readonly Projection[] = [streamCatalogProjection, ledgerProjection];
