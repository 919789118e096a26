import type { Migration } from '#platform/database';
import { appendDeadlineMigration, eventLogMigration, snapshotsMigration } from '#event-store/postgres';
import { projectionsMigration } from '#event-store/projections';
import { manualClockMigration } from '#platform/clock';
import { streamCatalogMigration } from '../streams/stream-catalog.read-model';
import { ledgerEntriesByTimeMigration, ledgerReadModelMigration } from '../ledger/ledger.read-model';
import { registryMigration } from '../merchants/schema';
import { keyTagKeyMigration } from '../merchants/key-tags';
import { accessControlMigration } from '../access/schema';
import { operatorSessionsMigration } from '../access/operator-sessions';
import { invoicesReadModelMigration } from '../invoices/invoices.read-model';
import { payoutAddressesMigration } from '../payouts/payout-addresses';
import { refundsReadModelMigration } from '../refunds/refunds.read-model';
import { payoutsReadModelMigration } from '../payouts/payouts.read-model';
import {
  webhookDeliveryAddressedAtMigration,
  webhookOutboxReachFromCheckpointMigration,
  webhookOutboxReachMigration,
  webhookQueueMigration,
} from '../webhooks/schema';
import { idempotencyKeysMigration } from '../idempotency/schema';
import { payoutIdsMigration } from '../payouts/payout-ids.schema';
import { auditSigningKeysMigration } from '../audit/signing-keys';
import { merchantEventsMigration, merchantEventsRecordedAtMigration } from '../events/merchant-events';

/**
 * Every schema change of the gateway, in version order: one migration per library's
 * tables as of the first release. Never edit an applied one: add a new one.
 */
export const allMigrations: readonly Migration[] = [
  eventLogMigration,
  projectionsMigration,
  snapshotsMigration,
  manualClockMigration,
  streamCatalogMigration,
  ledgerReadModelMigration,
  registryMigration,
  keyTagKeyMigration,
  invoicesReadModelMigration,
  accessControlMigration,
  payoutAddressesMigration,
  payoutIdsMigration,
  refundsReadModelMigration,
  payoutsReadModelMigration,
  webhookQueueMigration,
  idempotencyKeysMigration,
  operatorSessionsMigration,
  auditSigningKeysMigration,
  merchantEventsMigration,
  ledgerEntriesByTimeMigration,
  webhookOutboxReachMigration,
  webhookDeliveryAddressedAtMigration,
  merchantEventsRecordedAtMigration,
  webhookOutboxReachFromCheckpointMigration,
  appendDeadlineMigration,
];
