export * from './advance-payout.command';
export * from './payout-addresses';
export * from './payout-ids.schema';
export * from './payout-flow';
export * from './payout-view';
export * from './payouts.read-model';
export * from './settle-payout-outcome.command';
