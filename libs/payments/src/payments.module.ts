import { DynamicModule, Module, Provider, Type } from '@nestjs/common';
import type { Pool } from 'pg';
import type { EventStore } from '#event-store';
import type { GatewayServices } from './services';
import { LedgerBook } from './ledger';
import { PayoutAddresses, Registry } from './merchants';
import { PayoutFlow } from './payouts/payout-flow';
import { EVENT_STORE, GATEWAY_CLOCK, READ_MODELS } from './payments.tokens';
import { ReadStreamHandler } from './streams/read-stream.query';
import {
  AwaitPostedThroughHandler,
  GetAccountStatementHandler,
  GetReconciliationHandler,
  GetTrialBalanceHandler,
  IsAccountKnownHandler,
} from './audit/audit-reports.query';
import { GetStatementInLogHandler } from './audit/statement-in-log';
import { RefundFlow } from './refunds/refund-flow';
import { ExpireInvoiceHandler } from './invoices/expire-invoice.command';
import { AdvanceRefundHandler } from './refunds/advance-refund.command';
import { CompleteRefundHandler } from './refunds/complete-refund.command';
import { SettleRefundOutcomeHandler } from './refunds/settle-refund-outcome.command';
import { AdvancePayoutHandler } from './payouts/advance-payout.command';
import { SettlePayoutOutcomeHandler } from './payouts/settle-payout-outcome.command';
import { GetLedgerEntriesHandler } from './ledger/get-ledger-entries.query';
import { RecordPaymentHandler } from './ledger/record-payment.command';
import { ReleaseHoldHandler } from './ledger/release-hold.command';
import { ReleaseReservationHandler } from './ledger/release-reservation.command';
import { ReserveFundsHandler } from './ledger/reserve-funds.command';
import { SettleReservationHandler } from './ledger/settle-reservation.command';
import { GetBalanceAsOfHandler } from './balance/get-balance-as-of.query';
import { GetBalanceHandler } from './balance/get-balance.query';
import { GetLedgerBalanceHandler } from './balance/get-ledger-balance.query';
import { ListWebhookDeliveriesHandler } from './webhooks/list-webhook-deliveries.query';
import { ResendFailedWebhookDeliveriesHandler, ResendWebhookDeliveryHandler } from './webhooks/resend-webhook-delivery.command';
import { CreateAccountHandler } from './merchants/create-account.command';
import { CreateProjectHandler } from './merchants/create-project.command';
import { GetAccountHandler } from './merchants/get-account.query';
import { GetProjectHandler } from './merchants/get-project.query';
import { RotateProjectKeysHandler } from './merchants/rotate-project-keys.command';
import { RotateWebhookSecretHandler } from './merchants/rotate-webhook-secret.command';
import { UpdateProjectHandler } from './merchants/update-project.command';
import { GetLogCheckpointHandler } from './audit/get-log-checkpoint.query';
import { GetLedgerHistoryHandler } from './ledger/get-ledger-history.query';
import { ListAccountsHandler, ListProjectsOfAccountHandler } from './merchants/list-accounts.query';
import { GetProjectionLagHandler } from './observability/get-projection-lag.query';
import { ListMerchantEventsHandler } from './events/list-merchant-events.query';
import { ListBalanceTransactionsHandler } from './ledger/balance-transactions.query';
import { EnableWebhookEndpointHandler } from './webhooks/enable-webhook-endpoint.command';

/** The command handlers of the library: the use cases the projector's reactors drive (the API's are in its use-case folders). */
export const COMMAND_HANDLERS: readonly Type[] = [
  ExpireInvoiceHandler,
  AdvanceRefundHandler,
  CompleteRefundHandler,
  SettleRefundOutcomeHandler,
  AdvancePayoutHandler,
  SettlePayoutOutcomeHandler,
  RecordPaymentHandler,
  ReleaseHoldHandler,
  ReleaseReservationHandler,
  ReserveFundsHandler,
  SettleReservationHandler,
  ResendWebhookDeliveryHandler,
  ResendFailedWebhookDeliveriesHandler,
  CreateAccountHandler,
  CreateProjectHandler,
  RotateProjectKeysHandler,
  RotateWebhookSecretHandler,
  UpdateProjectHandler,
  EnableWebhookEndpointHandler,
];

/** Every query handler: each calls the read model (or the stream) it reads. */
export const QUERY_HANDLERS: readonly Type[] = [
  GetLedgerEntriesHandler,
  GetBalanceAsOfHandler,
  GetBalanceHandler,
  GetLedgerBalanceHandler,
  ListWebhookDeliveriesHandler,
  GetAccountHandler,
  GetProjectHandler,
  ReadStreamHandler,
  GetAccountStatementHandler,
  GetStatementInLogHandler,
  IsAccountKnownHandler,
  GetTrialBalanceHandler,
  AwaitPostedThroughHandler,
  GetReconciliationHandler,
  GetLogCheckpointHandler,
  GetLedgerHistoryHandler,
  ListAccountsHandler,
  ListProjectsOfAccountHandler,
  GetProjectionLagHandler,
  ListMerchantEventsHandler,
  ListBalanceTransactionsHandler,
];

/**
 * The payments handlers on the buses of `@nestjs/cqrs`, over one process's services:
 * the API's AppModule and the projector's application context import it (next to
 * `CqrsModule.forRoot()`), so every write, whoever asks, is the same command class
 * through the same handler.
 */
@Module({})
export class PaymentsModule {
  static register(services: GatewayServices, pool: Pool, store: EventStore, appHandlers: readonly Type[] = []): DynamicModule {
    const providers: Provider[] = [
      { provide: RefundFlow, useValue: services.refunds },
      { provide: PayoutFlow, useValue: services.payouts },
      { provide: LedgerBook, useValue: services.ledgers },
      { provide: Registry, useValue: services.registry },
      { provide: PayoutAddresses, useValue: services.payoutAddresses },
      { provide: READ_MODELS, useValue: pool },
      { provide: EVENT_STORE, useValue: store },
      { provide: GATEWAY_CLOCK, useValue: services.clock },
      ...COMMAND_HANDLERS,
      ...QUERY_HANDLERS,
      ...appHandlers,
    ];
    return { module: PaymentsModule, providers, exports: [] };
  }
}
