import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { EventStore } from '#event-store';
import { allProjections } from '../read-models';
import { EVENT_STORE, READ_MODELS } from '../payments.tokens';
import { LaggingProjection, ProjectionLag, projectionLag } from './projection-lag';

/**
 * Every projection with a stored checkpoint and how far it is behind the head of the
 * log (projectionLag), for any process on the database: the console of an API
 * process that runs no projector reads the projector's progress from the
 * checkpoints table. The read models' filters are known here; a process manager's
 * (webhook outbox, payments to ledger, outcomes) is not, so on EventStoreDB its lag
 * counts every event after its checkpoint (on PostgreSQL, the default, the count
 * never looks at filters). A projection that never stored a checkpoint is listed
 * with none, so a projector that has not started yet shows.
 */
export class GetProjectionLag extends Query<ProjectionLag[]> {}

@QueryHandler(GetProjectionLag)
export class GetProjectionLagHandler implements IQueryHandler<GetProjectionLag> {
  constructor(
    @Inject(READ_MODELS) private readonly pool: Pool,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  async execute(): Promise<ProjectionLag[]> {
    const stored = await this.pool.query<{ projection: string }>('SELECT projection FROM projection_checkpoints ORDER BY projection');
    const known = new Map<string, LaggingProjection>(allProjections.map((p) => [p.name, { name: p.name, filter: p.filter }]));
    for (const { projection } of stored.rows) if (!known.has(projection)) known.set(projection, { name: projection });
    const lags = await projectionLag(this.pool, this.store, [...known.values()]);
    return lags.sort((a, b) => (a.projection < b.projection ? -1 : a.projection > b.projection ? 1 : 0));
  }
}
