import { DynamicModule, Module } from '@nestjs/common';
import type { ReadModelRebuilds } from '#event-store/projections';
import { ReadModelsInterceptor } from './http/read-models';
import { HeavyReads, HeavyReadsInterceptor } from './http/heavy-reads';
import { CqrsModule } from '@nestjs/cqrs';
import { EVENT_STORE, PaymentsModule } from '#payments';
import type { Infrastructure } from '#payments/composition';
import type { GatewayServices } from '#payments/services';
import { AdminTokenGuard } from './http/auth/admin-token.guard';
import { ClockController } from './operations/clock.controller';
import { LedgerAuditController } from './ledger/ledger-audit.controller';
import { AuditReportsController } from './audit/audit-reports.controller';
import { AuditCheckpointController } from './audit/audit-checkpoint.controller';
import { AuditKeysController } from './audit/signing-keys/audit-keys.controller';
import { SignedStatementController, SignedStatements } from './audit/signed-statement/signed-statement.controller';
import { ReportBuilds } from './audit/report-builds';
import { AuditSigningKeys } from '#payments/audit';
import { ProjectsController } from './merchants/projects.controller';
import { StreamsController } from './operations/streams.controller';
import { HealthController, ReadinessProbe } from './health/health.controller';
import { CreateInvoiceRoute } from './invoices/create-invoice/create-invoice.route';
import { CreateInvoiceHandler } from './invoices/create-invoice/create-invoice.handler';
import { GetInvoiceRoute } from './invoices/get-invoice/get-invoice.route';
import { GetInvoiceHandler } from './invoices/get-invoice/get-invoice.handler';
import { ListInvoicesRoute } from './invoices/list-invoices/list-invoices.route';
import { ListInvoicesHandler } from './invoices/list-invoices/list-invoices.handler';
import { RecordPaymentResultRoute } from './invoices/record-payment-result/record-payment-result.route';
import { RecordPaymentResultHandler } from './invoices/record-payment-result/record-payment-result.handler';
import { ChooseInvoiceMethodHandler } from './pay/choose-invoice-method.handler';
import { RefundInvoiceRoute } from './refunds/refund-invoice/refund-invoice.route';
import { RefundInvoiceHandler } from './refunds/refund-invoice/refund-invoice.handler';
import { GetRefundRoute } from './refunds/get-refund/get-refund.route';
import { GetRefundHandler } from './refunds/get-refund/get-refund.handler';
import { FailRefundRoute } from './refunds/fail-refund/fail-refund.route';
import { FailRefundHandler } from './refunds/fail-refund/fail-refund.handler';
import { CreatePayoutRoute } from './payouts/create-payout/create-payout.route';
import { CreatePayoutHandler } from './payouts/create-payout/create-payout.handler';
import { GetPayoutRoute } from './payouts/get-payout/get-payout.route';
import { GetPayoutByOrderIdHandler, GetPayoutHandler } from './payouts/get-payout/get-payout.handler';
import { ListPayoutsRoute } from './payouts/list-payouts/list-payouts.route';
import { ListPayoutsHandler } from './payouts/list-payouts/list-payouts.handler';
import { TransitionPayoutRoute } from './payouts/transition-payout/transition-payout.route';
import * as payoutTransitions from './payouts/transition-payout/transition-payout.handler';
import { ListPayoutAddressesRoute, PayoutAddressesAdminRoute } from './payouts/payout-addresses/payout-addresses.route';
import { AddPayoutAddressHandler } from './payouts/payout-addresses/add-payout-address.handler';
import { ConfirmPayoutAddressHandler } from './payouts/payout-addresses/confirm-payout-address.handler';
import { ListPayoutAddressesHandler } from './payouts/payout-addresses/list-payout-addresses.handler';
import { WebhookDeliveriesController } from './webhooks/webhook-deliveries.controller';
import { MerchantAuthGuard } from './http/auth/merchant-auth.guard';
import { OpenApiController, OperatorOpenApiController } from './docs/openapi.controller';
import { ReferenceController } from './balance/reference.controller';
import { EventsController } from './events/events.controller';
import { BalanceTransactionsController } from './balance-transactions/balance-transactions.controller';
import { PaymentPageController } from './pay/payment-page.controller';
import { PageFormTokens } from './pay/page-form-token';
import { ConsoleController } from './console/console.controller';
import { AccessControl, OperatorSessions } from '#payments/access';
import type { IdempotencyKeys } from '#payments/idempotency';
import { IdempotencyGuard } from './http/idempotency';
import type { FailedAuthentication } from './http/auth/failed-authentication';
import type { OperatorToken } from './http/auth/operator-token';
import {
  ACCESS_CONTROL,
  AUDIT_SIGNER,
  CLOCK_TOKEN,
  DATABASE_POOL,
  IDEMPOTENCY_KEYS,
  FAILED_AUTHENTICATION,
  OPERATOR_SESSIONS,
  OPERATOR_TOKEN,
  PAGE_FORM_TOKENS,
  INFRASTRUCTURE,
  READ_MODEL_REBUILDS,
  PUBLIC_URL,
  PublicUrl,
  READINESS,
  REGISTRY,
} from './http/tokens';

/** How the API checks who calls it, built once per process (createApi). */
export interface ApiSecurity {
  readonly operatorToken: OperatorToken;
  readonly failedAuthentication: FailedAuthentication;
}

export interface ApiDependencies {
  readonly infrastructure: Infrastructure;
  readonly services: GatewayServices;
  readonly adminToken: string;
  readonly publicUrl: PublicUrl;
  readonly readiness?: ReadinessProbe;
  /** Which read models are being rebuilt (the process's one view: its routes answer 503 for those). */
  readonly readModelRebuilds: ReadModelRebuilds;
}

/** What the API process builds for itself around the routes (shared with its Fastify hooks). */
export interface ApiRuntime extends ApiSecurity {
  readonly idempotencyKeys: IdempotencyKeys;
}

/** The handlers of the use cases whose folders are in this app (the route, its request and its handler together). */
export const API_HANDLERS = [
  CreateInvoiceHandler,
  GetInvoiceHandler,
  ListInvoicesHandler,
  RecordPaymentResultHandler,
  ChooseInvoiceMethodHandler,
  RefundInvoiceHandler,
  GetRefundHandler,
  FailRefundHandler,
  CreatePayoutHandler,
  GetPayoutHandler,
  GetPayoutByOrderIdHandler,
  ListPayoutsHandler,
  payoutTransitions.ApprovePayoutHandler,
  payoutTransitions.ProcessPayoutHandler,
  payoutTransitions.PayPayoutHandler,
  payoutTransitions.RejectPayoutHandler,
  payoutTransitions.CancelPayoutHandler,
  AddPayoutAddressHandler,
  ConfirmPayoutAddressHandler,
  ListPayoutAddressesHandler,
];

@Module({})
export class AppModule {
  static register(deps: ApiDependencies, runtime: ApiRuntime): DynamicModule {
    const security = runtime;
    return {
      module: AppModule,
      // Every write the routes ask for is a command, every read a query, on the buses
      // of @nestjs/cqrs; the handlers are the payments module's.
      imports: [CqrsModule.forRoot(), PaymentsModule.register(deps.services, deps.infrastructure.pool, deps.infrastructure.store, API_HANDLERS)],
      controllers: [
        HealthController,
        ClockController,
        StreamsController,
        LedgerAuditController,
        AuditReportsController,
        AuditCheckpointController,
        AuditKeysController,
        SignedStatementController,
        ProjectsController,
        RecordPaymentResultRoute,
        TransitionPayoutRoute,
        PayoutAddressesAdminRoute,
        WebhookDeliveriesController,
        CreateInvoiceRoute,
        ListInvoicesRoute,
        GetInvoiceRoute,
        RefundInvoiceRoute,
        GetRefundRoute,
        FailRefundRoute,
        CreatePayoutRoute,
        ListPayoutsRoute,
        GetPayoutRoute,
        ListPayoutAddressesRoute,
        ReferenceController,
        EventsController,
        BalanceTransactionsController,
        PaymentPageController,
        ConsoleController,
        OpenApiController,
        OperatorOpenApiController,
      ],
      providers: [
        { provide: INFRASTRUCTURE, useValue: deps.infrastructure },
        SignedStatements,
        ReportBuilds,
        { provide: AUDIT_SIGNER, useValue: new AuditSigningKeys(deps.infrastructure.pool, deps.infrastructure, deps.infrastructure.clock) },
        { provide: DATABASE_POOL, useValue: deps.infrastructure.pool },
        { provide: EVENT_STORE, useValue: deps.infrastructure.store },
        { provide: CLOCK_TOKEN, useValue: deps.infrastructure.clock },
        { provide: OPERATOR_TOKEN, useValue: security.operatorToken },
        { provide: FAILED_AUTHENTICATION, useValue: security.failedAuthentication },
        { provide: READINESS, useValue: deps.readiness ?? (() => ({})) },
        { provide: PUBLIC_URL, useValue: deps.publicUrl },
        // Keyed from the secrets key, so every API process accepts the others' tokens.
        { provide: PAGE_FORM_TOKENS, useValue: new PageFormTokens(() => deps.infrastructure.secrets.derivedKeys('payment-page-form')) },
        // The merchant guard identifies keys through the registry.
        { provide: REGISTRY, useValue: deps.services.registry },
        {
          provide: ACCESS_CONTROL,
          useValue: new AccessControl(deps.infrastructure.pool, {
            perSecond: deps.infrastructure.config.rateLimitPerSecond,
            pollIntervalSeconds: deps.infrastructure.config.pollIntervalSeconds,
          }),
        },
        { provide: IDEMPOTENCY_KEYS, useValue: runtime.idempotencyKeys },
        // The console's sessions, in PostgreSQL: every API process accepts every session.
        { provide: OPERATOR_SESSIONS, useValue: new OperatorSessions(deps.infrastructure.pool) },
        AdminTokenGuard,
        MerchantAuthGuard,
        IdempotencyGuard,
        { provide: READ_MODEL_REBUILDS, useValue: deps.readModelRebuilds },
        // On the routes marked @ReadsModels, after the guards: an authenticated read of a read model being rebuilt gets 503, never an empty answer.
        ReadModelsInterceptor,
        // The heavy reads of each merchant account (@HeavyRead), at most two at a time in this process.
        HeavyReads,
        HeavyReadsInterceptor,
      ],
    };
  }
}
