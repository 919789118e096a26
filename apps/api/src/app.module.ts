import { DynamicModule, Module } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { PaymentsModule } from '../../../libs/payments/src/payments.module';
import type { Infrastructure } from '../../../libs/infrastructure/src/infrastructure';
import type { GatewayServices } from '../../../libs/infrastructure/src/services';
import { AdminTokenGuard } from './admin/admin-token.guard';
import { ClockController } from './admin/clock.controller';
import { InvoicePaymentsController } from './admin/invoice-payments.controller';
import { LedgerAuditController } from './admin/ledger-audit.controller';
import { ProjectsController } from './admin/projects.controller';
import { StreamsController } from './admin/streams.controller';
import { HealthController, ReadinessProbe } from './health/health.controller';
import { InvoicesController } from './merchant/invoices.controller';
import { RefundsController } from './merchant/refunds.controller';
import { PayoutsController } from './merchant/payouts.controller';
import { PayoutsAdminController } from './admin/payouts-admin.controller';
import { WebhookDeliveriesController } from './admin/webhook-deliveries.controller';
import { MerchantAuthGuard } from './merchant/merchant-auth.guard';
import { OpenApiController, OperatorOpenApiController } from './openapi/openapi.controller';
import { ReferenceController } from './merchant/reference.controller';
import { PaymentPageController } from './pay/payment-page.controller';
import { PageFormTokens } from './pay/page-form-token';
import { AccessControl } from '../../../libs/access/src';
import type { IdempotencyKeys } from '../../../libs/idempotency/src';
import { IdempotencyInterceptor } from './http/idempotency';
import type { FailedAuthentication } from './auth/failed-authentication';
import type { OperatorToken } from './auth/operator-token';
import {
  ACCESS_CONTROL,
  CLOCK_TOKEN,
  DATABASE_POOL,
  IDEMPOTENCY_KEYS,
  FAILED_AUTHENTICATION,
  OPERATOR_TOKEN,
  PAGE_FORM_TOKENS,
  INFRASTRUCTURE,
  PUBLIC_URL,
  PublicUrl,
  READINESS,
  REGISTRY,
} from './tokens';

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
}

/** What the API process builds for itself around the routes (shared with its Fastify hooks). */
export interface ApiRuntime extends ApiSecurity {
  readonly idempotencyKeys: IdempotencyKeys;
}

@Module({})
export class AppModule {
  static register(deps: ApiDependencies, runtime: ApiRuntime): DynamicModule {
    const security = runtime;
    return {
      module: AppModule,
      // Every write the routes ask for is a command, every read a query, on the buses
      // of @nestjs/cqrs; the handlers are the payments module's.
      imports: [CqrsModule.forRoot(), PaymentsModule.register(deps.services, deps.infrastructure.pool)],
      controllers: [
        HealthController,
        ClockController,
        StreamsController,
        LedgerAuditController,
        ProjectsController,
        InvoicePaymentsController,
        PayoutsAdminController,
        WebhookDeliveriesController,
        InvoicesController,
        RefundsController,
        PayoutsController,
        ReferenceController,
        PaymentPageController,
        OpenApiController,
        OperatorOpenApiController,
      ],
      providers: [
        { provide: INFRASTRUCTURE, useValue: deps.infrastructure },
        { provide: DATABASE_POOL, useValue: deps.infrastructure.pool },
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
        AdminTokenGuard,
        MerchantAuthGuard,
        IdempotencyInterceptor,
      ],
    };
  }
}
