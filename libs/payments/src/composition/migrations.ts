import type { Migration } from '#platform/database';
import {
  appendEventGroupIdCheckMigration,
  appendEventGroupMigration,
  appendEventGroupSetBasedMigration,
  eventHashChainMigration,
  eventLogCheckpointsMigration,
  eventStoreMigration,
} from '#event-store/postgres';
import {
  projectionDeferredAutovacuumMigration,
  projectionDeferredIndexesMigration,
  projectionHandoversMigration,
  projectionLeasesMigration,
  projectionResetsMigration,
  projectionsMigration,
} from '#event-store/projections';
import { streamCatalogMigration, streamCatalogOneIndexMigration } from '../streams/stream-catalog.read-model';
import { manualClockFollowersMigration, manualClockMigration } from '#platform/clock';
import { snapshotsMigration } from '#event-store/postgres';
import {
  balanceTransactionsMigration,
  ledgerOpenHoldsMigration,
  ledgerPostingsWithoutForeignKeyMigration,
  ledgerReadModelMigration,
  scheduledHoldEndMigration,
} from '../ledger/ledger.read-model';
import { projectWebhookSettingsMigration, registryMigration, webhookSecretChangesMigration, webhookSecretsSealedMigration } from '../merchants/schema';
import { keyTagKeyMigration } from '../merchants/key-tags';
import { accessControlMigration, usedSignaturesLoggedMigration } from '../access/schema';
import { operatorSessionsMigration } from '../access/operator-sessions';
import { invoiceListsByMerchantMigration, invoicesReadModelMigration } from '../invoices/invoices.read-model';
import { payoutAddressesMigration } from '../payouts/payout-addresses';
import { refundRequestsInLogMigration, refundsReadModelMigration } from '../refunds/refunds.read-model';
import { payoutsReadModelMigration } from '../payouts/payouts.read-model';
import {
  webhookAttemptsRecordedMigration,
  webhookAttemptsWithoutForeignKeyMigration,
  webhookDeliveriesAcknowledgedMigration,
  webhookDeliveriesByEventMigration,
  webhookDeliveriesByUrlMigration,
  webhookDeliveriesFillfactorMigration,
  webhookLeaseTokenMigration,
  webhookQueueApartMigration,
  webhookQueueMigration,
} from '../webhooks/schema';
import { webhookRetentionMigration } from '../webhooks/webhook-retention';
import {
  apiKeysByProjectMigration,
  idempotencyKeysByProjectMigration,
  idempotencyKeysMigration,
  idempotencyKeysProjectBackfillMigration,
  idempotencyKeysProjectScopeMigration,
  idempotencyKeysUnfilledMigration,
} from '../idempotency/schema';
import { payoutIdsMigration, payoutOrderIdClaimedAtMigration, payoutRequestKeysMigration } from '../payouts/payout-ids.schema';
import { ledgerCauseIndexMigration } from '../ledger/ledger-cause-index';
import { foldedStateAsJsonMigration, readModelRowsMigration } from '../read-models/folded-row';
import { readModelResetsCountedMigration } from '../read-models';
import { auditSigningKeysMigration } from '../audit/signing-keys';
import { merchantEventsMigration } from '../events/merchant-events';
import { webhookEndpointHealthMigration } from '../webhooks/endpoint-health';

/** Every schema change of the gateway, in version order. Never edit an applied one: add a new one. */
export const allMigrations: readonly Migration[] = [
  eventStoreMigration,
  projectionsMigration,
  streamCatalogMigration,
  manualClockMigration,
  snapshotsMigration,
  ledgerReadModelMigration,
  registryMigration,
  // Keys are issued with their tag from the registry's first project on.
  keyTagKeyMigration,
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
  projectionHandoversMigration,
  webhookSecretsSealedMigration,
  usedSignaturesLoggedMigration,
  webhookRetentionMigration,
  ledgerPostingsWithoutForeignKeyMigration,
  eventHashChainMigration,
  eventLogCheckpointsMigration,
  operatorSessionsMigration,
  webhookAttemptsRecordedMigration,
  appendEventGroupMigration,
  appendEventGroupIdCheckMigration,
  projectionDeferredIndexesMigration,
  webhookDeliveriesByUrlMigration,
  webhookDeliveriesFillfactorMigration,
  projectionDeferredAutovacuumMigration,
  webhookQueueApartMigration,
  webhookAttemptsWithoutForeignKeyMigration,
  foldedStateAsJsonMigration,
  webhookSecretChangesMigration,
  auditSigningKeysMigration,
  merchantEventsMigration,
  balanceTransactionsMigration,
  webhookEndpointHealthMigration,
  readModelRowsMigration,
  streamCatalogOneIndexMigration,
  appendEventGroupSetBasedMigration,
  invoiceListsByMerchantMigration,
  webhookDeliveriesByEventMigration,
  projectWebhookSettingsMigration,
  manualClockFollowersMigration,
  webhookDeliveriesAcknowledgedMigration,
  scheduledHoldEndMigration,
  refundRequestsInLogMigration,
  // Before 0050: its trigger reads api_keys by project.
  apiKeysByProjectMigration,
  idempotencyKeysByProjectMigration,
  payoutOrderIdClaimedAtMigration,
  idempotencyKeysUnfilledMigration,
  idempotencyKeysProjectBackfillMigration,
  idempotencyKeysProjectScopeMigration,
  projectionResetsMigration,
  readModelResetsCountedMigration,
];
