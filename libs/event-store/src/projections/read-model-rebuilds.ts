import type { Pool } from 'pg';
import type { EventStore, Position } from '..';

/** A read model being rebuilt: since when, and how far its checkpoint is (the share of the log's positions, 0..1). */
export interface RebuildInProgress {
  readonly projection: string;
  readonly startedAt: Date;
  readonly checkpoint: Position;
}

/** A rebuild as readiness and the console show it: the share of the log its checkpoint has passed (0..1, by log position). */
export interface RebuildProgressReport {
  readonly projection: string;
  readonly startedAt: string;
  readonly progress: number;
}

/** Every read model being rebuilt now, with its progress towards the head of the log. */
export async function rebuildsInProgress(rebuilds: ReadModelRebuilds, store: Pick<EventStore, 'headPosition'>): Promise<RebuildProgressReport[]> {
  const [inProgress, head] = await Promise.all([rebuilds.inProgress(), store.headPosition()]);
  return inProgress.map((r) => ({
    projection: r.projection,
    startedAt: r.startedAt.toISOString(),
    progress: head === null || head.prepare === 0n ? 1 : Math.min(1, Number(r.checkpoint.prepare) / Number(head.prepare)),
  }));
}

/** How old this process's view of the marks may be when a request asks (`projections:rebuild` waits longer than this before it empties anything). */
export const REBUILD_MARKS_MAX_AGE_MS = 1_000;
/** How often the view is refreshed in the background. */
const REFRESH_MS = 500;

/**
 * Which read models are being rebuilt, as this process last saw their marks
 * (projection_checkpoints.rebuild_started_at): a request that reads one answers 503
 * instead of an empty or partial answer, and a worker that reads one waits. The view
 * is refreshed every half second, and a request finding it older than
 * REBUILD_MARKS_MAX_AGE_MS refreshes it first; `projections:rebuild` marks the read
 * models and waits REBUILD_ANNOUNCE_MS (longer) before it empties them, so a request
 * that started after they were emptied sees the mark.
 */
export class ReadModelRebuilds {
  private marks: readonly RebuildInProgress[] = [];
  private seenAt = 0;
  private refreshing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly pool: Pool) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.refresh().catch(() => undefined), REFRESH_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** The read models among `names` being rebuilt now. */
  async rebuilding(names: readonly string[]): Promise<string[]> {
    if (Date.now() - this.seenAt > REBUILD_MARKS_MAX_AGE_MS) await this.refresh();
    return names.filter((name) => this.marks.some((m) => m.projection === name));
  }

  /** Every read model being rebuilt, read now. */
  async inProgress(): Promise<readonly RebuildInProgress[]> {
    await this.refresh();
    return this.marks;
  }

  private refresh(): Promise<void> {
    // The view is as old as the moment it was asked for (its snapshot is taken after).
    const asked = Date.now();
    this.refreshing ??= this.pool
      .query<{ projection: string; rebuild_started_at: Date; commit_position: string; prepare_position: string; emptied: boolean }>(
        `SELECT projection, rebuild_started_at, commit_position, prepare_position, updated_at >= rebuild_started_at AS emptied
         FROM projection_checkpoints WHERE rebuild_started_at IS NOT NULL ORDER BY projection`,
      )
      .then((r) => {
        this.marks = r.rows.map((row) => ({
          projection: row.projection,
          startedAt: row.rebuild_started_at,
          // Marked but not yet emptied (the checkpoint is still the old one, written before the mark): nothing rebuilt yet.
          checkpoint: row.emptied ? { commit: BigInt(row.commit_position), prepare: BigInt(row.prepare_position) } : { commit: 0n, prepare: 0n },
        }));
        this.seenAt = asked;
      })
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }
}

/**
 * Read models found being rebuilt by a reader: marked in the snapshot of one of its
 * statements, or emptied again (their resets moved) since its first one. What was read
 * of them may be empty, partial or of two builds (a rebuild empties its tables with
 * TRUNCATE and fills them again), so nothing built from it is answered. The API answers
 * it as @ReadsModels does (503).
 */
export class ReadModelRebuildingError extends Error {
  constructor(readonly projections: readonly string[]) {
    super(`read model(s) being rebuilt: ${projections.join(', ')}`);
    this.name = 'ReadModelRebuildingError';
  }
}

/** The rebuild state of some read models as one statement saw them: those marked, and how often they have been emptied in all. */
export interface RebuildState {
  readonly marked: readonly string[];
  readonly resets: string;
}

/**
 * SQL for the RebuildState (as json) of the read models among `names` (a text[]
 * parameter, e.g. `$1`), as of the snapshot of the statement it is part of. A rebuild
 * marks its read models before, or in the transaction where, it empties them, and counts
 * the emptying there (projection_checkpoints.resets): a statement that reads their
 * tables and this sees the mark whenever it read them emptied or part refilled.
 */
export const rebuildStateSql = (names: string) =>
  `(SELECT json_build_object('marked', coalesce(array_agg(projection ORDER BY projection) FILTER (WHERE rebuild_started_at IS NOT NULL), '{}'),
                             'resets', coalesce(sum(resets), 0)::text)
      FROM projection_checkpoints WHERE projection = ANY(${names}::text[]))`;

/**
 * Throws ReadModelRebuildingError when `state`, a reader's first statement's, marks one
 * of `names` (what it read may be emptied or part refilled); or, for a later statement
 * (`since`: the first one's state), when they have been emptied since. A mark alone does
 * not stop a reader under way: until the emptying, what it reads is whole.
 */
export function refuseRebuilt(names: readonly string[], state: RebuildState, since?: RebuildState): void {
  if (since === undefined && state.marked.length > 0) throw new ReadModelRebuildingError(state.marked);
  if (since !== undefined && state.resets !== since.resets) throw new ReadModelRebuildingError(names);
}
