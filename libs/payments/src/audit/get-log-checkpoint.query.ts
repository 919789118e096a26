import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { EventStore, LogCheckpoint } from '#event-store';
import { extendLogCheckpoints, PostgresEventStore } from '#event-store';
import { EVENT_STORE, READ_MODELS } from '../payments.tokens';

/**
 * The log's checkpoint at its visible head: position, number of events and running hash
 * (docs/audit-log.md). Extends the recorded checkpoints first (never waiting on appends).
 */
export class GetLogCheckpoint extends Query<LogCheckpoint> {}

/** The checkpoints are kept over the PostgreSQL events table; an EventStoreDB deployment has none. */
export class LogCheckpointUnavailableError extends Error {
  constructor() {
    super('log checkpoints are kept for the PostgreSQL event store only');
    this.name = 'LogCheckpointUnavailableError';
  }
}

@QueryHandler(GetLogCheckpoint)
export class GetLogCheckpointHandler implements IQueryHandler<GetLogCheckpoint> {
  constructor(
    @Inject(READ_MODELS) private readonly pool: Pool,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  execute(): Promise<LogCheckpoint> {
    if (!(this.store instanceof PostgresEventStore)) throw new LogCheckpointUnavailableError();
    return extendLogCheckpoints(this.pool);
  }
}
