import { PostgresSnapshotStore } from '#event-store';
import { LedgerBook, LedgerBookObserver } from '../ledger';
import type { FlowObserver } from '../flows/flow-observer';
import { PostgresLedgerCauseIndex } from '../ledger/ledger-cause-index';
import { FixedUsdtRate, PayoutFlow, RefundFlow } from '..';
import { PayoutAddresses, Registry } from '../merchants';
import type { Infrastructure } from '../composition/infrastructure';
import type { Clock } from '#platform/clock';

/** The gateway's application services, built once per process over its infrastructure. */
export interface GatewayServices {
  readonly registry: Registry;
  readonly payoutAddresses: PayoutAddresses;
  readonly ledgers: LedgerBook;
  readonly refunds: RefundFlow;
  readonly payouts: PayoutFlow;
  /** The gateway clock the services date their decisions with. */
  readonly clock: Clock;
}

export function createServices(
  infra: Infrastructure,
  observers: { readonly ledger?: LedgerBookObserver; readonly flows?: FlowObserver } = {},
): GatewayServices {
  const registry = new Registry(infra.pool, infra.secrets);
  const payoutAddresses = new PayoutAddresses(infra.pool);
  const ledgers = new LedgerBook(infra.store, new PostgresSnapshotStore(infra.pool), {
    causes: new PostgresLedgerCauseIndex(infra.pool),
    observer: observers.ledger,
    clock: infra.clock,
  });
  const { config } = infra;
  return {
    clock: infra.clock,
    registry,
    payoutAddresses,
    ledgers,
    refunds: new RefundFlow(infra.store, ledgers, config.refundProcessingSeconds, infra.pool, observers.flows, infra.clock),
    payouts: new PayoutFlow(
      infra.store,
      infra.pool,
      ledgers,
      payoutAddresses,
      config.payoutTerms,
      new FixedUsdtRate(config.usdtRubRate),
      observers.flows,
      infra.clock,
    ),
  };
}
