import type { Pool } from 'pg';
import type { EventStore, LogReadScope, Position, RecordedEvent } from '..';
import { comparePositions, matchesFilter } from '..';
import { inTransaction } from '#platform/database';
import type { Logger } from '#platform/logging';
import { applyBatchWithCheckpoint } from './apply-batch';
import { advanceCheckpoint, CheckpointMovedError, ensureCheckpoint, readCheckpoint } from './checkpoints';
import { deferAutovacuum, deferSecondaryIndexes, restoreDeferredIndexes } from './deferred-indexes';
import type { Projection } from './projection';
import { HeldProjectionLocks } from './projection-locks';

/** One projection's progress in a rebuild, for a progress bar. */
export interface RebuildProgress {
  readonly projection: string;
  readonly eventsApplied: bigint;
  /** Rough share of the log done, from log positions. */
  readonly fraction: number;
  readonly done: boolean;
  /** False: computed from the log's table in SQL, in one statement (Projection.rebuildInDatabase), not read through the log page by page. */
  readonly readsLog: boolean;
}

/** Log events read per page by a rebuild of several projections (each projection's batch is a page). */
export const REBUILD_PAGE_EVENTS = 10_000;
/** Pages read ahead of the slowest projection: what bounds the memory of a rebuild. */
const PAGES_AHEAD = 2;

export interface RebuiltProjection {
  readonly projection: string;
  readonly eventsApplied: bigint;
  /** From the start of the rebuild to this projection's last batch. */
  readonly seconds: number;
  /** Seconds inside this projection's batches (prepare, apply and checkpoint). */
  readonly applySeconds: number;
}

export interface RebuildTogetherResult {
  readonly projections: readonly RebuiltProjection[];
  /** Log events read by the pass. */
  readonly logEventsRead: number;
  /** Seconds waiting for pages of the log (reads the projections did not overlap). */
  readonly readWaitSeconds: number;
  readonly seconds: number;
}

export interface RebuildTogetherOptions {
  /** Log events per page (default REBUILD_PAGE_EVENTS). */
  readonly batchSize?: number;
  /** Go on from the stored checkpoints instead of emptying the read models first. */
  readonly resume?: boolean;
  readonly onProgress?: (p: RebuildProgress) => void;
  readonly log?: Logger;
  /**
   * The projections' locks, held by the caller (`projections:rebuild` holds every
   * pass's on its own session; `lost` tells when they are gone). Without, this call
   * takes them over itself (HeldProjectionLocks.takeOver) and lets them go at its end.
   */
  readonly locks?: { readonly lost: string | null };
  /** How long to wait for running projectors to hand the projections over (default PROJECTION_HANDOVER_WAIT_MS). */
  readonly handoverWaitMs?: number;
  /** How often the leases of the projections being rebuilt are renewed (default as ProjectionRunner). */
  readonly leaseRenewMs?: number;
  /**
   * False: every projection from its events, none computed in SQL (Projection.rebuildInDatabase),
   * to check that SQL against the projection's own `apply` (the read models must be equal).
   */
  readonly computeInDatabase?: boolean;
}

/**
 * Rebuilds several projections from position zero to the head of the log as it is
 * now, reading the log once: every page of the log is handed to each projection,
 * which applies the events that match its filter and moves its own checkpoint in one
 * transaction per page (applyBatchWithCheckpoint), each projection on a connection of
 * its own, the next page read while they apply. The reader runs at most PAGES_AHEAD
 * pages ahead of the slowest projection, so memory is bounded by the page size,
 * whatever the length of the log.
 *
 * The read takes only the part of the log the projections want (logReadScopeOf: the
 * events of their filters, data only where a projection reads data), and each
 * checkpoint moves to the head at the end. A projection that SQL can compute from the
 * log's own table (Projection.rebuildInDatabase) is, when the store keeps the log in
 * this database and the projection starts from zero, in one transaction beside the
 * pass, unless `computeInDatabase` is false (decision 0095).
 *
 * Nothing is reset before every projection's lock is held: a running projector hands
 * each over (HeldProjectionLocks.takeOver) or the call fails having changed nothing.
 * Each projection is then reset (tables emptied, checkpoint at zero) in one
 * transaction; its batches commit with its checkpoint, so a rebuild killed at any
 * moment and resumed (by a projector, or by this call with `resume`) ends with the
 * same read model.
 */
export async function rebuildProjectionsTogether(
  pool: Pool,
  store: EventStore,
  projections: readonly Projection[],
  options: RebuildTogetherOptions = {},
): Promise<RebuildTogetherResult> {
  const started = Date.now();
  const seconds = () => (Date.now() - started) / 1000;
  const own = options.locks
    ? null
    : await HeldProjectionLocks.takeOver(
        pool,
        projections.map((p) => p.name),
        { renewMs: options.leaseRenewMs, waitMs: options.handoverWaitMs, log: options.log },
      );
  try {
    const head = await store.headPosition();
    if (!options.resume) await resetForRebuild(pool, projections);
    const pass = await onePass(pool, store, projections, head, options.locks ?? own!, options, seconds);
    await pool.query('UPDATE projection_checkpoints SET rebuild_started_at = NULL WHERE projection = ANY($1::text[])', [projections.map((p) => p.name)]);
    return { ...pass, seconds: seconds() };
  } finally {
    await own?.release();
  }
}

/**
 * Marks the projections as being rebuilt (rebuild_started_at), in a transaction of its
 * own: the API answers 503 for their read models from its next look at the marks
 * (ReadModelRebuilds), while the models are still whole. `projections:rebuild` waits
 * REBUILD_ANNOUNCE_MS after this before it empties anything.
 */
export async function announceRebuild(pool: Pool, projections: readonly Projection[]): Promise<void> {
  await pool.query(
    `INSERT INTO projection_checkpoints (projection, rebuild_started_at) SELECT projection, now() FROM unnest($1::text[]) AS p(projection)
     ON CONFLICT (projection) DO UPDATE SET rebuild_started_at = now()`,
    [projections.map((p) => p.name)],
  );
}

/**
 * How long a reset stands in its tables' lock queue (where every reader of them waits
 * behind it) before it steps out: shorter than PostgreSQL's deadlock_timeout (1 s), so a
 * reader that took one of the tables by its query and queued for another behind the
 * reset is let through, not found in a deadlock.
 */
export const RESET_LOCK_WAIT_MS = 200;
/** How long it then lets the readers through before it queues again. */
const RESET_RETRY_MS = 500;

/**
 * Empties the projections' tables, drops their secondary indexes and switches their
 * autovacuum off (both undone when each projection's pass ends: deferSecondaryIndexes,
 * deferAutovacuum) and moves their checkpoints back to zero, marked as being rebuilt, in
 * one transaction (the TRUNCATE counts the reset: count_projection_reset). The caller
 * holds every projection's lock. It first locks the tables, waiting at most
 * RESET_LOCK_WAIT_MS for each: a session still reading them (a `ledger:verify`, a
 * checksum, a report, a statement's page) would make it wait with every later reader
 * queued behind it, or wait for it in a cycle. Not granted, it tells `onWait` who holds
 * them and tries again until they have let them go; when only autovacuum holds them, the
 * next try waits past deadlock_timeout, after which PostgreSQL cancels the autovacuum.
 * `keepIndexes`: the tables keep their indexes and autovacuum, for batches applied
 * without a rebuild's pass (a test, the bench's runner baseline).
 */
export async function resetForRebuild(
  pool: Pool,
  projections: readonly Projection[],
  options: { onWait?: (holders: readonly string[]) => void; keepIndexes?: boolean } = {},
): Promise<void> {
  const tables = projections.flatMap((p) => p.tables);
  // Waiting past deadlock_timeout lets PostgreSQL cancel an autovacuum that holds a table: done when only autovacuum holds them.
  let waitMs = RESET_LOCK_WAIT_MS;
  for (;;) {
    try {
      await inTransaction(pool, async (tx) => {
        await tx.query(`SET LOCAL lock_timeout = ${waitMs}`);
        if (tables.length > 0) await tx.query(`LOCK TABLE ${tables.join(', ')} IN ACCESS EXCLUSIVE MODE`);
        await tx.query('SET LOCAL lock_timeout = 0');
        if (tables.length > 0) await tx.query(`TRUNCATE ${tables.join(', ')}`);
        for (const p of options.keepIndexes ? [] : projections) {
          await deferSecondaryIndexes(tx, p.name, p.tables, p.primaryKeyBuiltAfterRebuild);
          await deferAutovacuum(tx, p.name, p.tables);
        }
        await tx.query(
          `INSERT INTO projection_checkpoints (projection, commit_position, prepare_position, events_applied, updated_at, rebuild_started_at)
           SELECT projection, 0, 0, 0, now(), now() FROM unnest($1::text[]) AS p(projection)
           ON CONFLICT (projection) DO UPDATE SET commit_position = 0, prepare_position = 0, events_applied = 0,
             updated_at = now(), rebuild_started_at = coalesce(projection_checkpoints.rebuild_started_at, now())`,
          [projections.map((p) => p.name)],
        );
      });
      return;
    } catch (error) {
      // Not granted in time; or (should a reader still close a cycle with it) chosen as a deadlock's victim.
      const code = (error as { code?: unknown }).code;
      if (code !== '55P03' && code !== '40P01') throw error;
    }
    const holders = await tableHolders(pool, tables);
    options.onWait?.(holders.map((h) => h.name));
    waitMs = holders.length > 0 && holders.every((h) => h.autovacuum) ? holders[0]!.deadlockTimeoutMs + RESET_LOCK_WAIT_MS : RESET_LOCK_WAIT_MS;
    await new Promise((resolve) => setTimeout(resolve, RESET_RETRY_MS));
  }
}

/** The other sessions holding a lock on any of `tables`: `application_name (pid N)` (an autovacuum by its kind), and whether each is an autovacuum. */
async function tableHolders(pool: Pool, tables: readonly string[]): Promise<{ name: string; autovacuum: boolean; deadlockTimeoutMs: number }[]> {
  const { rows } = await pool.query<{ name: string; autovacuum: boolean; deadlock_timeout_ms: number }>(
    `SELECT DISTINCT coalesce(nullif(a.application_name, ''), a.backend_type) || ' (pid ' || a.pid || ')' AS name,
            a.backend_type = 'autovacuum worker' AS autovacuum,
            (SELECT setting::int FROM pg_settings WHERE name = 'deadlock_timeout') AS deadlock_timeout_ms
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.granted AND l.relation = ANY(SELECT to_regclass(t)::oid FROM unnest($1::text[]) AS t) AND a.pid <> pg_backend_pid()
      ORDER BY 1`,
    [tables],
  );
  return rows.map((r) => ({ name: r.name, autovacuum: r.autovacuum, deadlockTimeoutMs: r.deadlock_timeout_ms }));
}

/**
 * The part of the log a pass for these projections reads: only the events one of them
 * wants when each has a filter, and the data only of the events a projection that
 * reads data wants (readsEventData).
 */
export function logReadScopeOf(projections: readonly Projection[]): LogReadScope {
  const filters = (of: readonly Projection[]) => (of.every((p) => p.filter !== undefined) ? of.map((p) => p.filter!) : undefined);
  const readingData = projections.filter((p) => p.readsEventData !== false);
  return {
    matching: filters(projections),
    // Every projection reads data: the events read carry theirs.
    withDataOf: readingData.length === projections.length ? undefined : filters(readingData),
  };
}

interface Page {
  readonly events: readonly RecordedEvent[];
  /** The position of the page's last event: each projection's checkpoint after it. */
  readonly to: Position;
}

async function onePass(
  pool: Pool,
  store: EventStore,
  projections: readonly Projection[],
  head: Position | null,
  locks: { readonly lost: string | null },
  options: RebuildTogetherOptions,
  seconds: () => number,
): Promise<{ projections: RebuiltProjection[]; logEventsRead: number; readWaitSeconds: number }> {
  const pageSize = options.batchSize ?? REBUILD_PAGE_EVENTS;
  const all = await Promise.all(
    projections.map(async (projection) => {
      await ensureCheckpoint(pool, projection.name);
      const row = (await readCheckpoint(pool, projection.name))!;
      return { projection, checkpoint: row.position, applied: row.eventsApplied, applySeconds: 0, finishedAt: 0, next: 0 };
    }),
  );
  // Those computed from the log's table in SQL (the log in this database, the projection at zero); the others from pages of the log.
  const logHere = options.computeInDatabase !== false && store.keepsLogIn?.(pool) === true;
  const inDatabase = all.filter((w) => logHere && w.projection.rebuildInDatabase !== undefined && w.applied === 0n && isZero(w.checkpoint));
  const writers = all.filter((w) => !inDatabase.includes(w));
  const report = (w: (typeof writers)[number], done: boolean) =>
    options.onProgress?.({
      projection: w.projection.name,
      eventsApplied: w.applied,
      fraction: fractionDone(w.checkpoint, head),
      done,
      readsLog: !inDatabase.includes(w),
    });
  // Every projection's start, so that a progress bar knows which of them read the log.
  for (const w of all) report(w, false);

  // Pages in log order; page i is pages[i - dropped]. A page goes once every writer is past it.
  const pages: Page[] = [];
  let dropped = 0;
  let readerDone = false;
  let failure: Error | null = null;
  // The reader and the writers wait for one another: any change wakes every waiter, who looks again.
  let waiters: (() => void)[] = [];
  const signal = () => {
    const woken = waiters;
    waiters = [];
    for (const wake of woken) wake();
  };
  const waitForChange = () => new Promise<void>((resolve) => waiters.push(resolve));
  const check = () => {
    if (failure) throw failure;
    if (locks.lost !== null) throw new Error(`rebuild stopped: ${locks.lost}`);
  };

  let logEventsRead = 0;
  let readWaitSeconds = 0;
  const start = writers.reduce<Position>((min, w) => (comparePositions(w.checkpoint, min) < 0 ? w.checkpoint : min), head ?? ZERO);

  // Room for one more page: the reader waits while it is PAGES_AHEAD pages ahead of the slowest writer.
  const roomForAPage = async () => {
    for (;;) {
      check();
      const slowest = Math.min(...writers.map((w) => w.next));
      if (dropped + pages.length - slowest < PAGES_AHEAD) return;
      await waitForChange();
    }
  };
  // Every writer done with every page read so far: the time since then is time waiting for the log.
  const allWaiting = () => Math.min(...writers.map((w) => w.next)) >= dropped + pages.length;
  // When the reader began its current page, and when a writer last finished one (Date.now()).
  let idleSince = Date.now();
  let lastPageDoneAt = Date.now();

  // The log as pages: from one read in one statement when the store has it (readAllThrough), else a read per page.
  const readThrough = async (upTo: Position) => {
    let events: RecordedEvent[] = [];
    const pushPage = () => {
      if (allWaiting()) readWaitSeconds += (Date.now() - Math.max(idleSince, lastPageDoneAt)) / 1000;
      logEventsRead += events.length;
      pages.push({ events, to: events[events.length - 1]!.position });
      events = [];
      signal();
      idleSince = Date.now();
    };
    const after = isZero(start) ? 'start' : start;
    const onEvent = (event: RecordedEvent) => {
      events.push(event);
      if (events.length < pageSize) return;
      pushPage();
      return roomForAPage();
    };
    await store.readAllThrough!({ after, upTo }, onEvent, logReadScopeOf(writers.map((w) => w.projection)));
    if (events.length > 0) pushPage();
  };

  const readPages = async (upTo: Position) => {
    let after = start;
    // An empty page before the head: events of the log not yet visible (a transaction of the cluster holds them back).
    while (comparePositions(after, upTo) < 0) {
      await roomForAPage();
      const waitStarted = Date.now();
      const events = await store.readAll({ after: isZero(after) ? 'start' : after, maxCount: pageSize });
      if (allWaiting()) readWaitSeconds += (Date.now() - waitStarted) / 1000;
      if (events.length === 0) {
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      logEventsRead += events.length;
      after = events[events.length - 1]!.position;
      pages.push({ events, to: after });
      signal();
    }
  };

  const reader = async () => {
    if (writers.length > 0 && head !== null && comparePositions(start, head) < 0) {
      if (store.readAllThrough) await readThrough(head);
      else await readPages(head);
    }
    readerDone = true;
    signal();
  };

  // A projection's end: its checkpoint moved to the head by `reach` (unless it is there), then the indexes
  // this rebuild (or an interrupted one) dropped, made again by sorting what is now in the tables.
  const finish = async (w: (typeof all)[number], reach: (head: Position) => Promise<void>) => {
    if (head !== null && comparePositions(w.checkpoint, head) < 0) {
      await reach(head);
      w.checkpoint = head;
      report(w, false);
    }
    const began = Date.now();
    await restoreDeferredIndexes(pool, w.projection.name);
    w.applySeconds += (Date.now() - began) / 1000;
    w.finishedAt = seconds();
  };

  const writer = async (w: (typeof writers)[number]) => {
    for (;;) {
      check();
      if (w.next >= dropped + pages.length) {
        if (readerDone) {
          // A read of part of the log (logReadScopeOf) ends before the head: the checkpoint moves past the rest, none of which the projection wants.
          await finish(w, (to) => applyWithRetry(pool, w, [], to, check, options.log));
          break;
        }
        await waitForChange();
        continue;
      }
      const page = pages[w.next - dropped]!;
      if (comparePositions(page.to, w.checkpoint) > 0) {
        const events = eventsFor(w.projection, page.events, w.checkpoint);
        await applyWithRetry(pool, w, events, page.to, check, options.log);
        w.checkpoint = page.to;
        w.applied += BigInt(events.length);
      }
      w.next++;
      lastPageDoneAt = Date.now();
      w.finishedAt = seconds();
      report(w, false);
      // Drop the pages every writer is done with.
      const slowest = Math.min(...writers.map((x) => x.next));
      while (dropped < slowest) {
        pages.shift();
        dropped++;
      }
      signal();
    }
  };

  // A projection computed in SQL: one transaction from zero to the head, then its indexes.
  const computer = (w: (typeof all)[number]) =>
    finish(w, (to) =>
      withRetry(w, check, options.log, async () => {
        const applied = await inTransaction(
          pool,
          async (tx) => {
            const n = await w.projection.rebuildInDatabase!(tx, to);
            await advanceCheckpoint(tx, w.projection.name, w.checkpoint, to, n);
            return n;
          },
          { synchronousCommit: 'off' },
        );
        w.applied += BigInt(applied);
      }),
    );

  const tasks = [reader(), ...writers.map(writer), ...inDatabase.map(computer)].map((t) =>
    t.catch((error: unknown) => {
      failure ??= error as Error;
      signal();
    }),
  );
  await Promise.all(tasks);
  if (failure) throw failure;
  for (const w of all) report(w, true);
  return {
    projections: all.map((w) => ({
      projection: w.projection.name,
      eventsApplied: w.applied,
      seconds: w.finishedAt,
      applySeconds: w.applySeconds,
    })),
    logEventsRead,
    readWaitSeconds,
  };
}

/**
 * The events of a page (in log order) past a projection's checkpoint that match its
 * filter. A page wholly past the checkpoint (every page of a rebuild but the one a
 * resumed rebuild starts in) is not compared event by event, and without a filter
 * it is handed over as it is.
 */
function eventsFor(projection: Projection, events: readonly RecordedEvent[], checkpoint: Position): readonly RecordedEvent[] {
  const filter = projection.filter;
  if (comparePositions(events[0]!.position, checkpoint) > 0) return filter ? events.filter((e) => matchesFilter(filter, e)) : events;
  return events.filter((e) => comparePositions(e.position, checkpoint) > 0 && matchesFilter(filter, e));
}

/**
 * Applies one projection's page; a failed batch (a dropped connection, a database
 * restart) is retried with back-off from the same checkpoint, never skipped, as
 * ProjectionRunner does. A checkpoint moved by someone else, or an error no retry
 * can cure (a syntax or data error), ends the rebuild.
 */
function applyWithRetry(
  pool: Pool,
  w: { projection: Projection; checkpoint: Position; applySeconds: number },
  events: readonly RecordedEvent[],
  to: Position,
  check: () => void,
  log: Logger | undefined,
): Promise<void> {
  return withRetry(w, check, log, () => applyBatchWithCheckpoint(pool, w.projection, { from: w.checkpoint, to, events }));
}

/** Runs one transaction of a projection's rebuild (`work`), retried with back-off as applyWithRetry says; its time counts in `applySeconds`. */
async function withRetry(
  w: { projection: Projection; applySeconds: number },
  check: () => void,
  log: Logger | undefined,
  work: () => Promise<void>,
): Promise<void> {
  let backoffMs = 100;
  for (;;) {
    const began = Date.now();
    try {
      await work();
      w.applySeconds += (Date.now() - began) / 1000;
      return;
    } catch (error) {
      w.applySeconds += (Date.now() - began) / 1000;
      if (error instanceof CheckpointMovedError || isFatal(error)) throw error;
      log?.warn({ err: error, projection: w.projection.name }, 'rebuild batch failed; retrying');
      await new Promise((r) => setTimeout(r, backoffMs));
      backoffMs = Math.min(backoffMs * 2, 10_000);
      check();
    }
  }
}

/** A programming or data error (SQL classes 42 and 22): retrying cannot cure it. */
function isFatal(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && /^(42|22)/.test(code);
}

const ZERO: Position = { commit: 0n, prepare: 0n };

function isZero(position: Position): boolean {
  return position.commit === 0n && position.prepare === 0n;
}

function fractionDone(position: Position, head: Position | null): number {
  if (head === null || head.prepare === 0n) return 1;
  return Math.min(1, Number(position.prepare) / Number(head.prepare));
}
