import type { Migration } from './migrate';
import { eventStoreMigration } from '../../event-store/src/postgres/schema';
import { projectionLeasesMigration, projectionsMigration } from '../../projections/src/schema';
import { streamCatalogMigration } from '../../read-models/src/stream-catalog.projection';
import { manualClockMigration } from '../../clock/src/manual-clock-sync';
import { snapshotsMigration } from '../../event-store/src/postgres/snapshot-store';
import { ledgerOpenHoldsMigration, ledgerReadModelMigration } from '../../read-models/src/ledger.projection';
import { registryMigration, webhookSecretsSealedMigration } from '../../registry/src/schema';
import { accessControlMigration, usedSignaturesLoggedMigration } from '../../access/src/schema';
import { invoicesReadModelMigration } from '../../read-models/src/invoices.projection';
import { payoutAddressesMigration } from '../../registry/src/payout-addresses';
import { refundsReadModelMigration } from '../../read-models/src/refunds.projection';
import { payoutsReadModelMigration } from '../../read-models/src/payouts.projection';
import { webhookLeaseTokenMigration, webhookQueueMigration } from '../../webhooks/src/schema';
import { webhookRetentionMigration } from '../../webhooks/src/webhook-retention';
import { idempotencyKeysMigration } from '../../idempotency/src/schema';
import { payoutIdsMigration, payoutRequestKeysMigration } from '../../payments/src/schema';
import { ledgerCauseIndexMigration } from '../../read-models/src/ledger-cause-index';

/** Every schema change of the gateway, in version order. Never edit an applied one: add a new one. */
export const allMigrations: readonly Migration[] = [
  eventStoreMigration,
  projectionsMigration,
  streamCatalogMigration,
  manualClockMigration,
  snapshotsMigration,
  ledgerReadModelMigration,
  registryMigration,
  invoicesReadModelMigration,
  ledgerOpenHoldsMigration,
  accessControlMigration,
  payoutAddressesMigration,
  payoutIdsMigration,
  refundsReadModelMigration,
  payoutsReadModelMigration,
  webhookQueueMigration,
  ledgerCauseIndexMigration,
  idempotencyKeysMigration,
  payoutRequestKeysMigration,
  webhookLeaseTokenMigration,
  projectionLeasesMigration,
  webhookSecretsSealedMigration,
  usedSignaturesLoggedMigration,
  webhookRetentionMigration,
];
