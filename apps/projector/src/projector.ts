import type { Pool } from 'pg';
import type { EventStore } from '../../../libs/event-store/src';
import { positionToString } from '../../../libs/event-store/src';
import type { Logger } from '../../../libs/logging/src/logger';
import { Projection, ProjectionRunner } from '../../../libs/projections/src';

/** Runs every projection of the gateway, each as its own runner. */
export class Projector {
  private readonly runners: ProjectionRunner[];

  constructor(pool: Pool, store: EventStore, projections: readonly Projection[], log: Logger, batchSize?: number) {
    this.runners = projections.map((p) => new ProjectionRunner(pool, store, p, { log, batchSize }));
  }

  start(): void {
    for (const runner of this.runners) runner.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.runners.map((r) => r.stop()));
  }

  report() {
    return this.runners.map((r) => {
      const s = r.status();
      return {
        projection: s.projection,
        state: s.state,
        checkpoint: s.checkpoint ? positionToString(s.checkpoint) : null,
        lastError: s.lastError,
      };
    });
  }
}
