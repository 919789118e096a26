import { DynamicModule, Module } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { EventStore } from '#event-store';
import type { GatewayServices } from '#payments/services';
import { PaymentsModule } from '#payments';

/**
 * The projector's NestJS application context: no HTTP, only the buses and the
 * payments handlers, so its workers and process managers send the same command
 * classes through the same handlers as the API.
 */
@Module({})
export class ProjectorModule {
  static register(services: GatewayServices, pool: Pool, store: EventStore): DynamicModule {
    return { module: ProjectorModule, imports: [CqrsModule.forRoot(), PaymentsModule.register(services, pool, store)] };
  }
}
