import type { Projection } from '../../projections/src';
import { streamCatalogProjection } from './stream-catalog.projection';

export * from './stream-catalog.projection';

/** Every projection the projector runs, by name. */
export const allProjections: readonly Projection[] = [streamCatalogProjection];
