import { PostgresSnapshotStore } from '../../event-store/src';
import { LedgerBook } from '../../ledger-store/src';
import { InvoiceService } from '../../payments/src';
import { Registry } from '../../registry/src';
import type { Infrastructure } from './infrastructure';

/** The gateway's application services, built once per process over its infrastructure. */
export interface GatewayServices {
  readonly registry: Registry;
  readonly ledgers: LedgerBook;
  readonly invoices: InvoiceService;
}

export function createServices(infra: Infrastructure): GatewayServices {
  const registry = new Registry(infra.pool);
  return {
    registry,
    ledgers: new LedgerBook(infra.store, new PostgresSnapshotStore(infra.pool)),
    invoices: new InvoiceService(infra.store, registry),
  };
}
