import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool, PoolClient } from 'pg';
import { comparePositions, type Position } from '..';
import { activeLease } from './projection-locks';

export const ZERO: Position = { commit: 0n, prepare: 0n };

export interface CheckpointRow {
  readonly projection: string;
  readonly position: Position;
  readonly eventsApplied: bigint;
  readonly updatedAt: Date;
  readonly rebuildStartedAt: Date | null;
}

type Queryable = Pick<Pool | PoolClient, 'query'>;

/** Thrown when another instance moved the checkpoint under us: our batch is not applied. */
export class CheckpointMovedError extends Error {
  constructor(readonly projection: string) {
    super(`checkpoint of projection ${projection} was moved by another instance`);
    this.name = 'CheckpointMovedError';
  }
}

export async function ensureCheckpoint(db: Queryable, projection: string): Promise<void> {
  await db.query('INSERT INTO projection_checkpoints (projection) VALUES ($1) ON CONFLICT DO NOTHING', [projection]);
}

export async function readCheckpoint(db: Queryable, projection: string): Promise<CheckpointRow | null> {
  const result = await db.query<{
    commit_position: string;
    prepare_position: string;
    events_applied: string;
    updated_at: Date;
    rebuild_started_at: Date | null;
  }>('SELECT * FROM projection_checkpoints WHERE projection = $1', [projection]);
  const row = result.rows[0];
  if (!row) return null;
  return {
    projection,
    position: { commit: BigInt(row.commit_position), prepare: BigInt(row.prepare_position) },
    eventsApplied: BigInt(row.events_applied),
    updatedAt: row.updated_at,
    rebuildStartedAt: row.rebuild_started_at,
  };
}

/** The stored positions of the named projections (those with a checkpoint row), by name, and whether each is marked as being rebuilt. */
export async function readCheckpointStates(
  db: Queryable,
  projections: readonly string[],
): Promise<Map<string, { readonly position: Position; readonly rebuilding: boolean }>> {
  const rows = await db.query<{ projection: string; commit_position: string; prepare_position: string; rebuilding: boolean }>(
    `SELECT projection, commit_position, prepare_position, rebuild_started_at IS NOT NULL AS rebuilding
     FROM projection_checkpoints WHERE projection = ANY($1)`,
    [projections],
  );
  return new Map(
    rows.rows.map((r) => [r.projection, { position: { commit: BigInt(r.commit_position), prepare: BigInt(r.prepare_position) }, rebuilding: r.rebuilding }]),
  );
}

/** The stored positions of the named projections (those with a checkpoint row), by name. */
export async function readCheckpointPositions(db: Queryable, projections: readonly string[]): Promise<Map<string, Position>> {
  return new Map([...(await readCheckpointStates(db, projections))].map(([name, state]) => [name, state.position]));
}

/** Compare-and-set: moves the checkpoint from `from` to `to` or throws CheckpointMovedError. */
export async function advanceCheckpoint(tx: Queryable, projection: string, from: Position, to: Position, applied: number): Promise<void> {
  const result = await tx.query(
    `UPDATE projection_checkpoints
     SET commit_position = $4, prepare_position = $5, events_applied = events_applied + $6, updated_at = now()
     WHERE projection = $1 AND commit_position = $2 AND prepare_position = $3`,
    [projection, from.commit.toString(), from.prepare.toString(), to.commit.toString(), to.prepare.toString(), applied],
  );
  if (result.rowCount !== 1) throw new CheckpointMovedError(projection);
}

/**
 * Whether `projection`'s checkpoint has reached `position` (it has handled the event
 * there), asked every `pollMs`: read-your-writes for what a reactor does after an
 * append, across processes (DESIGN.md: the command returns its position and the caller
 * waits, with a bound, until the follower has passed it). It waits `boundMs`, and past
 * that up to `whileRunningMs` more while the instance that held the projection's lease
 * when the wait began still holds it: running behind on a loaded database, not failing
 * (a failed batch gives the lease up) nor absent. Answers how long it waited.
 */
export async function checkpointReached(
  db: Queryable,
  projection: string,
  position: Position,
  bounds: { readonly boundMs: number; readonly whileRunningMs?: number },
  pollMs = 5,
): Promise<{ readonly reached: boolean; readonly waitedMs: number }> {
  const running = bounds.whileRunningMs ? await activeLease(db, projection) : null;
  const leaseCheckEvery = Math.max(1, Math.round(250 / pollMs));
  const started = performance.now();
  // The time waited is measured, not counted in polls: each poll's query and timer add to its pollMs.
  for (let waited = 0, polls = 0; ; waited = Math.round(performance.now() - started), polls++) {
    const row = await readCheckpoint(db, projection);
    if (row !== null && comparePositions(row.position, position) >= 0) return { reached: true, waitedMs: waited };
    if (waited >= bounds.boundMs) {
      if (running === null || waited >= bounds.boundMs + bounds.whileRunningMs!) return { reached: false, waitedMs: waited };
      if (polls % leaseCheckEvery === 0) {
        const now = await activeLease(db, projection);
        if (now?.holder !== running.holder || now.acquiredAt !== running.acquiredAt) return { reached: false, waitedMs: waited };
      }
    }
    await sleep(pollMs);
  }
}
