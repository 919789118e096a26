/**
 * How `projections:rebuild` shares the read models between passes (rebuildPassesOf,
 * REBUILD_PASSES) and what part of the log each pass reads (logReadScopeOf), decision
 * 0095. Pure: no database.
 */
import type { Projection } from '#event-store/projections';
import { logReadScopeOf } from '#event-store/projections';
import {
  allProjections,
  invoicesProjection,
  ledgerProjection,
  payoutsProjection,
  REBUILD_PASSES,
  rebuildPassesOf,
  refundsProjection,
  streamCatalogProjection,
} from '#payments/read-models';

const names = (passes: readonly (readonly Projection[])[]) => passes.map((pass) => pass.map((p) => p.name));

describe('the passes of a rebuild', () => {
  it('put every read model in exactly one pass: the ledger with the stream catalog, invoices with refunds and payouts', () => {
    expect(names(rebuildPassesOf(allProjections))).toEqual([
      ['ledger', 'stream_catalog'],
      ['invoices', 'refunds', 'payouts'],
    ]);
    expect(names(REBUILD_PASSES).flat().sort()).toEqual(allProjections.map((p) => p.name).sort());
  });

  it('leave out what is not rebuilt, and a pass with nothing left', () => {
    expect(names(rebuildPassesOf([invoicesProjection]))).toEqual([['invoices']]);
    expect(names(rebuildPassesOf([payoutsProjection, streamCatalogProjection]))).toEqual([['stream_catalog'], ['payouts']]);
    expect(rebuildPassesOf([])).toEqual([]);
  });

  it('put a read model no pass names in the first', () => {
    const audit: Projection = { name: 'audit_trail', tables: [], apply: async () => undefined };
    expect(names(rebuildPassesOf([refundsProjection, audit]))).toEqual([['audit_trail'], ['refunds']]);
    expect(names(rebuildPassesOf([ledgerProjection, audit, refundsProjection]))).toEqual([['ledger', 'audit_trail'], ['refunds']]);
  });
});

describe('the part of the log a pass reads', () => {
  it('is every event when one projection has no filter, with the data only of the events a projection that reads data wants', () => {
    expect(logReadScopeOf([ledgerProjection, streamCatalogProjection])).toEqual({ matching: undefined, withDataOf: [ledgerProjection.filter] });
    // The stream catalog alone: every event, none with its data.
    expect(logReadScopeOf([streamCatalogProjection])).toEqual({ matching: undefined, withDataOf: [] });
  });

  it('is the events the projections want when each has a filter, every one with its data when each reads data', () => {
    expect(logReadScopeOf([invoicesProjection, refundsProjection, payoutsProjection])).toEqual({
      matching: [invoicesProjection.filter, refundsProjection.filter, payoutsProjection.filter],
      withDataOf: undefined,
    });
    const unfiltered: Projection = { name: 'everything', tables: [], apply: async () => undefined };
    expect(logReadScopeOf([unfiltered, payoutsProjection])).toEqual({ matching: undefined, withDataOf: undefined });
  });
});
