import { DynamicModule, Module } from '@nestjs/common';
import type { Infrastructure } from '../../../libs/infrastructure/src/infrastructure';
import { AdminTokenGuard } from './admin/admin-token.guard';
import { ClockController } from './admin/clock.controller';
import { LedgerAuditController } from './admin/ledger-audit.controller';
import { StreamsController } from './admin/streams.controller';
import { PostgresSnapshotStore } from '../../../libs/event-store/src';
import { LedgerBook } from '../../../libs/ledger-store/src';
import { HealthController, ReadinessProbe } from './health/health.controller';
import { ADMIN_TOKEN, CLOCK_TOKEN, DATABASE_POOL, INFRASTRUCTURE, LEDGER_BOOK, READINESS } from './tokens';

export interface ApiDependencies {
  readonly infrastructure: Infrastructure;
  readonly adminToken: string;
  readonly readiness?: ReadinessProbe;
}

@Module({})
export class AppModule {
  static register(deps: ApiDependencies): DynamicModule {
    return {
      module: AppModule,
      controllers: [HealthController, ClockController, StreamsController, LedgerAuditController],
      providers: [
        { provide: INFRASTRUCTURE, useValue: deps.infrastructure },
        { provide: DATABASE_POOL, useValue: deps.infrastructure.pool },
        { provide: ADMIN_TOKEN, useValue: deps.adminToken },
        { provide: READINESS, useValue: deps.readiness ?? (() => ({})) },
        { provide: CLOCK_TOKEN, useValue: deps.infrastructure.clock },
        {
          provide: LEDGER_BOOK,
          useValue: new LedgerBook(deps.infrastructure.store, new PostgresSnapshotStore(deps.infrastructure.pool)),
        },
        AdminTokenGuard,
      ],
    };
  }
}
