import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool } from 'pg';
import { AllFilter, comparePositions, EventStore, matchesFilter, Position, PostgresEventStore, RecordedEvent } from '#event-store';
import { readCheckpointPositions, readCheckpointStates } from '#event-store/projections';
import { PAYMENTS_TO_LEDGER, PAYMENTS_TO_LEDGER_FILTER } from '../reactors/payments-to-ledger.reactor';
import { PAYOUT_OUTCOMES_FILTER, REFUND_OUTCOMES_FILTER } from '../reactors/refund-and-payout-outcomes.reactor';
import { PAYOUT_OUTCOMES, REFUND_OUTCOMES } from '../flows/outcomes';
import { ledgerProjection } from '../ledger/ledger.read-model';
import { invoicesProjection } from '../invoices/invoices.read-model';
import { refundsProjection } from '../refunds/refunds.read-model';
import { payoutsProjection } from '../payouts/payouts.read-model';
import { projectionsNamed } from '../read-models/table-locks';
import type { Mode } from '#domain';
import { POSTING_MARGIN_MS } from '../flows/decided-now';

/** The one ledger a report is about: an account in a mode. */
export interface ReportedLedger {
  readonly accountId: string;
  readonly mode: Mode;
}

/** How long a report waits for its figures to be final before it answers 503 (Retry-After: 1). */
export const POSTED_WAIT_MS = 5_000;

/** A follower of the log a report waits for: its checkpoint row, and what of the log it takes. */
export interface Follower {
  readonly name: string;
  readonly filter?: AllFilter;
  /**
   * The earliest instant (ms) whose figures an event it takes changes: the date of the entry a
   * reactor posts for it, of the requested flow a read model adds. Events changing only later
   * figures are not waited for by a report of an earlier instant (a busy merchant's reactor, seconds
   * behind the head, holds back no report of a past period). Unset: every event is waited for.
   */
  readonly changesFrom?: (event: RecordedEvent) => number;
}

const followerOf = (p: { name: string; filter?: AllFilter }): Follower => ({ name: p.name, filter: p.filter });

/** An event's instant field in ms; one that is not an instant changes figures of any instant. */
const instantOf = (value: unknown): number => (typeof value === 'string' && !Number.isNaN(Date.parse(value)) ? Date.parse(value) : -Infinity);
const field = (event: RecordedEvent, name: string): unknown => (event.data as Record<string, unknown> | null)?.[name];

/** The reactors that post a flow's ledger entries dated with the time of its event (paidAt, the outcome's at), after it. */
export const LEDGER_POSTERS: readonly Follower[] = [
  { name: PAYMENTS_TO_LEDGER, filter: PAYMENTS_TO_LEDGER_FILTER, changesFrom: (e) => instantOf(field(e, 'paidAt')) },
  { name: REFUND_OUTCOMES, filter: REFUND_OUTCOMES_FILTER, changesFrom: (e) => instantOf(field(e, 'at')) },
  { name: PAYOUT_OUTCOMES, filter: PAYOUT_OUTCOMES_FILTER, changesFrom: (e) => instantOf(field(e, 'at')) },
];

/**
 * The read models halfDoneFlows reads, for the flows they add as requested (dated with the
 * request); their other events only take a flow out of `requested`, which a report waits for anyway.
 */
const REQUESTED_FLOWS: readonly Follower[] = [
  { ...followerOf(refundsProjection), changesFrom: (e) => (e.type === 'InvoiceRefundRequested' ? instantOf(field(e, 'at')) : Infinity) },
  { ...followerOf(payoutsProjection), changesFrom: (e) => (e.type === 'PayoutRequested' ? instantOf(field(e, 'createdAt')) : Infinity) },
];

/** The read models the reports read. */
export const REPORTED_READ_MODELS = {
  ledger: followerOf(ledgerProjection),
  invoices: followerOf(invoicesProjection),
  refunds: followerOf(refundsProjection),
  payouts: followerOf(payoutsProjection),
} as const;

/** Their tables. */
export const REPORTED_TABLES: readonly string[] = projectionsNamed(Object.values(REPORTED_READ_MODELS).map((m) => m.name)).flatMap((p) => p.tables);

/**
 * Waits until no ledger entry dated at or before `at` is still to come, so that a report
 * as of `at` never changes afterwards (a signed statement least of all), in two steps:
 *
 * 1. `at` is more than POSTING_MARGIN_MS past (`now`: the gateway clock's when asked):
 *    what was decided by then is in the log. Once every transaction begun by then has
 *    ended (an older one still open hides later events on PostgreSQL), the reactors that
 *    post a flow's entries with its event's time have reached that head, and no refund
 *    or payout requested by `at` is left half-done (the recovery worker finishes one
 *    after 5 s, its reservation dated with its request).
 * 2. What they posted is visible and the read models the report reads (`readers`) have
 *    reached the head as it is then.
 *
 * True when so; false when not within `waitMs` (a projector stopped or behind, a
 * transaction left open). `ledger`: a report of one ledger waits only for its flows.
 */
export async function awaitPostedThrough(
  pool: Pick<Pool, 'query'>,
  store: Pick<EventStore, 'headPosition' | 'readAll'>,
  now: Date,
  at: Date,
  readers: readonly Follower[],
  options: { readonly ledger?: ReportedLedger; readonly waitMs?: number } = {},
): Promise<boolean> {
  const waitMs = options.waitMs ?? POSTED_WAIT_MS;
  const deadline = Date.now() + waitMs;
  const early = at.getTime() + POSTING_MARGIN_MS - now.getTime();
  if (early > waitMs) return false;
  if (early > 0) await sleep(early);
  // Each step against one head, read once: under steady traffic the head never stands still.
  const posters = await settledHead(pool, store, deadline);
  if (posters === undefined) return false;
  const postersReached = reachedThrough(pool, store, [...LEDGER_POSTERS, ...REQUESTED_FLOWS], posters, at.getTime(), deadline);
  const posted = await until(
    deadline,
    async () =>
      (await postersReached.reached()) &&
      !(await halfDoneFlows(pool, at, options.ledger)) &&
      // A read model rebuilt between the two reads (emptied, its checkpoint set back in one transaction): the half-done check read it empty.
      !(await postersReached.rebuiltSince()),
  );
  if (!posted) return false;
  const read = await settledHead(pool, store, deadline);
  if (read === undefined) return false;
  return until(deadline, reachedThrough(pool, store, readers, read, Infinity, deadline).reached);
}

async function until(deadline: number, done: () => Promise<boolean>): Promise<boolean> {
  for (;;) {
    if (await done()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(50);
  }
}

/**
 * The head of the log once every transaction begun before this call has ended (on
 * PostgreSQL an older one still open hides the events committed after it): what was
 * committed by now is in it. Undefined when that is not so by `deadline`; null for an
 * empty log.
 */
async function settledHead(pool: Pick<Pool, 'query'>, store: Pick<EventStore, 'headPosition'>, deadline: number): Promise<Position | null | undefined> {
  if (store instanceof PostgresEventStore) {
    const begun = (await pool.query<{ xmax: string }>('SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xmax')).rows[0]!.xmax;
    const ended = await until(
      deadline,
      async () => (await pool.query<{ ended: boolean }>('SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::xid8 AS ended', [begun])).rows[0]!.ended,
    );
    if (!ended) return undefined;
  }
  return store.headPosition();
}

/**
 * Whether each follower has handled every event up to `head` that its filter takes and that
 * changes figures as of `at` (ms; Infinity: every event), asked again and again: the events
 * past a checkpoint are read once, up to the first such one, which the checkpoint must pass.
 */
function reachedThrough(
  pool: Pick<Pool, 'query'>,
  store: Pick<EventStore, 'readAll'>,
  followers: readonly Follower[],
  head: Position | null,
  at: number,
  deadline: number,
): { reached(): Promise<boolean>; rebuiltSince(): Promise<boolean> } {
  /**
   * Per follower: its checkpoint when last asked, the events up to `through` read, and the first of
   * them that changes the figures, if one was met.
   */
  const scanned = new Map<string, { checkpoint: Position; through: Position; pending: Position | null }>();
  /** Each follower's checkpoint when `reached` last asked. */
  const lastAsked = new Map<string, Position>();
  const names = followers.map((f) => f.name);
  const reached = async (): Promise<boolean> => {
    if (head === null || followers.length === 0) return true;
    const stored = await readCheckpointPositions(pool, names);
    for (const follower of followers) {
      const checkpoint = stored.get(follower.name);
      if (checkpoint === undefined) return false;
      lastAsked.set(follower.name, checkpoint);
      if (comparePositions(checkpoint, head) >= 0) continue;
      // A stored checkpoint trails the events its follower skipped (on PostgreSQL for up to CHECKPOINT_DEFER_MS, on
      // EventStoreDB until a server checkpoint): the events after it up to the head say whether it is done.
      let seen = scanned.get(follower.name);
      // A checkpoint set back (its read model rebuilt from the start, emptied meanwhile): what was read past it says nothing.
      if (seen && comparePositions(checkpoint, seen.checkpoint) < 0) seen = undefined;
      if (seen?.pending && comparePositions(checkpoint, seen.pending) < 0) {
        scanned.set(follower.name, { ...seen, checkpoint });
        return false;
      }
      let from = seen && comparePositions(seen.through, checkpoint) > 0 ? seen.through : checkpoint;
      for (;;) {
        const page = await store.readAll({ after: from, maxCount: 1_000 });
        const upToHead = page.filter((e) => comparePositions(e.position, head) <= 0);
        const pending = upToHead.find((e) => matchesFilter(follower.filter, e) && (follower.changesFrom?.(e) ?? -Infinity) <= at);
        if (pending) {
          scanned.set(follower.name, { checkpoint, through: pending.position, pending: pending.position });
          return false;
        }
        from = upToHead.at(-1)?.position ?? from;
        seen = { checkpoint, through: from, pending: null };
        scanned.set(follower.name, seen);
        if (upToHead.length < page.length || page.length < 1_000) break;
        // A long way behind the head: the rest is read at the next ask, if the wait has time left.
        if (Date.now() >= deadline) return false;
      }
    }
    return true;
  };
  /**
   * Whether a follower's read model is marked as being rebuilt (rebuild_started_at: set before it is emptied, cleared
   * once it has caught up again), or its checkpoint is behind where `reached` last found it: either way what was read of
   * it meanwhile may have been an emptied or partial table.
   */
  const rebuiltSince = async (): Promise<boolean> => {
    if (lastAsked.size === 0) return false;
    const now = await readCheckpointStates(pool, [...lastAsked.keys()]);
    return [...lastAsked].some(([name, asked]) => {
      const state = now.get(name);
      return state === undefined || state.rebuilding || comparePositions(state.position, asked) < 0;
    });
  };
  return { reached, rebuiltSince };
}

/**
 * A refund or payout requested by `at` and not yet taken through its first ledger step:
 * of the one ledger a report is about (one stuck flow does not hold back another
 * account's statement, nor a test refund the live one), else of any. Payouts are live.
 */
async function halfDoneFlows(pool: Pick<Pool, 'query'>, at: Date, ledger?: ReportedLedger): Promise<boolean> {
  const r = await pool.query<{ any: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM refunds WHERE status = 'requested' AND requested_at <= $1
                      AND ($2::text IS NULL OR account_id::text = $2 AND mode = $3::text))
         OR ($3::text IS DISTINCT FROM 'test' AND EXISTS (SELECT 1 FROM payouts WHERE status = 'requested' AND created_at <= $1
                      AND ($2::text IS NULL OR account_id::text = $2))) AS any`,
    [at, ledger?.accountId ?? null, ledger?.mode ?? null],
  );
  return r.rows[0]!.any;
}
