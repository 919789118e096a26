import type { Pool } from 'pg';
import { comparePositions, EventStore } from '#event-store';
import { Projection, ProjectionRunner } from '#event-store/projections';

/** Runs `projection` until it has applied the whole log as it stands now, then stops it. */
export async function projectToHead(pool: Pool, store: EventStore, projection: Projection, batchSize = 250): Promise<void> {
  const runner = new ProjectionRunner(pool, store, projection, { batchSize });
  runner.start();
  const head = await store.headPosition();
  const deadline = Date.now() + 60_000;
  while (!(runner.status().checkpoint && comparePositions(runner.status().checkpoint!, head!) >= 0)) {
    if (Date.now() > deadline) throw new Error(`${projection.name} projection did not catch up`);
    await new Promise((r) => setTimeout(r, 20));
  }
  await runner.stop();
}
