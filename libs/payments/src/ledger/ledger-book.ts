import type { DatedByDecision, EventStore, RecordedEvent, RefusedDecision, SnapshotPolicy, SnapshotStore } from '#event-store';
import type { Clock } from '#platform/clock';
import { decidedNow } from '../flows/decided-now';
import { END, handleCommand, loadState, StreamNotFoundError } from '#event-store';
import {
  BalancesAsOf,
  BalancesAsOfFold,
  causeOf,
  checkLedgerSnapshot,
  entriesBeforeWindow,
  evolve,
  hasRecentCause,
  initialLedgerState,
  Kopecks,
  LedgerCommand,
  holdsToRelease,
  RELEASES_PER_DECISION,
  currentLedgerFoldVersion,
  LedgerError,
  LedgerEvent,
  LedgerId,
  ledgerSnapshotOf,
  ledgerDecider,
  ledgerEntryId,
  LedgerState,
  ledgerStreamName,
  needsCauseLookup,
  openPayoutReservations,
  Refusal,
  ReservationRefusal,
  sameMoneyDecided,
} from '#ledger';
import type { Position } from '#event-store';

/** A ledger command before its entry id is derived from its cause. */
export type LedgerRequest = LedgerCommand extends infer C ? (C extends LedgerCommand ? Omit<C, 'entryId'> : never) : never;

export interface Posted {
  /** The entry this request posted, or null when its cause had already posted (a repeat). */
  readonly entry: LedgerEvent['data'] | null;
  readonly state: LedgerState;
  readonly position: Position | null;
}

/** Snapshot every 500 entries: loading a ledger reads at most that many events, however long its history. */
export const LEDGER_SNAPSHOT_EVERY = 500;
/** Entries read per page when a ledger is read from its start. */
const ENTRY_PAGE = 2000;

/**
 * An exact index of the causes a ledger has posted, derived from its log (in the
 * gateway: the `ledger_entries` read model). It may lag the log, never run ahead of
 * it nor skip an entry: it holds every entry of the ledger up to `completeThrough`.
 */
export interface LedgerCauseIndex {
  /**
   * Read at one instant: the revision of the entry that posted `cause` in the ledger,
   * if the index holds it, and the highest revision up to which it holds every entry
   * of the ledger (-1 when it holds none).
   */
  find(ledger: LedgerId, cause: string): Promise<{ readonly revision: bigint | null; readonly completeThrough: bigint }>;
}

/** No index: a cause older than the window is looked for in the stream itself. */
export const NO_CAUSE_INDEX: LedgerCauseIndex = { find: async () => ({ revision: null, completeThrough: -1n }) };

/** What the book tells the process (metrics, logs). Must not throw; must be cheap. */
export interface LedgerBookObserver {
  /**
   * A cause older than the window of recent causes was looked up: found or not, and
   * how many entries had to be read from the stream beyond what the index holds.
   */
  causeLookedUp?(streamName: string, found: boolean, entriesReadFromStream: number): void;
  /**
   * The event store refused an entry because it already holds its id (the id derives
   * from the ledger and the cause): what the book found when it re-read the ledger.
   */
  repeatRefusedByStore?(streamName: string, repeat: RefusedRepeat): void;
  /** A stored snapshot failed its checks on load: ignored, the ledger folded from its events. */
  snapshotRejected?(streamName: string, revision: bigint, reason: string): void;
}

/**
 * An entry the store refused as a repeat, and the entry of that id in the ledger:
 *
 * - `concurrent`: another writer posted the cause, with the same money, after the
 *   state this decision was made on (ordinary concurrency: the decision was stale);
 * - `missed`: the entry was already in the state the decision was made on, with the
 *   same money: the book's own check of the cause missed it and only the store's
 *   unique ids stopped it (no money affected; EventStoreDB checks ids only at the
 *   expected revision and would have stored it twice);
 * - `differs`: the ledger holds the cause with other money than this decision (or
 *   not at all): the same cause was decided twice with different amounts, and money
 *   could be wrong.
 */
export interface RefusedRepeat {
  readonly cause: string;
  readonly outcome: 'concurrent' | 'missed' | 'differs';
  /** The revision of the ledger the refused decision was made on (-1: an empty ledger). */
  readonly decidedOn: bigint;
  /** The revision of the entry of that id in the ledger; null when the ledger holds none. */
  readonly storedAt: bigint | null;
  readonly refused: LedgerEvent['data'];
  readonly stored: LedgerEvent['data'] | null;
}

export interface LedgerBookOptions {
  /** Where causes older than the window are looked up first (default: none, the stream is read). */
  readonly causes?: LedgerCauseIndex;
  readonly observer?: LedgerBookObserver;
  /** The gateway clock a hold's release is dated with when decided (unset: dated as given). */
  readonly clock?: Clock;
}

/**
 * Moves the outcomes of those of the given open payout reservations whose payouts are
 * finished in their own streams, as the payout_outcomes reactor would: how many it moved.
 */
export type ClosesFinishedPayouts = (reservationIds: readonly string[]) => Promise<number>;

/** Rounds of closing finished payouts before a payout reservation's refusal is recorded. */
const CLOSING_ROUNDS = 5;

/** Entries read per page when looking for a cause in the stream. */
const CAUSE_SCAN_PAGE = 1000;

/** Every attempt to release a ledger's due holds lost to the hold-release worker: retried by the caller's recovery. */
export class DueHoldsRaceError extends Error {
  constructor(ledger: LedgerId) {
    super(`ledger ${ledger.mode}_${ledger.accountId}: the due holds are still being released by another writer`);
    this.name = 'DueHoldsRaceError';
  }
}

/**
 * The merchants' ledgers, persisted in the event store: one stream per account and
 * mode, optimistic concurrency with retry, snapshots so a command's cost does not
 * grow with the ledger's history.
 *
 * The same cause never posts twice, however old, on any event store: the state's
 * window answers recent causes; on a ledger longer than the window, a cause the
 * state cannot answer is looked up exactly in the log (the cause index up to what
 * it holds, the stream itself between that and the window) and the answer is given
 * to the decision (`postedBeforeWindow`). The deterministic entry ids stay a second
 * line of defence where the store enforces them (PostgreSQL).
 */
export class LedgerBook {
  private readonly causes: LedgerCauseIndex;
  private readonly observer: LedgerBookObserver;

  constructor(
    private readonly store: EventStore,
    snapshots: SnapshotStore,
    options: LedgerBookOptions = {},
  ) {
    this.causes = options.causes ?? NO_CAUSE_INDEX;
    this.observer = options.observer ?? {};
    this.released = options.clock ? releasesDated(options.clock) : undefined;
    this.snapshotPolicy = {
      store: snapshots,
      schemaVersion: currentLedgerFoldVersion(),
      every: LEDGER_SNAPSHOT_EVERY,
      encode: ledgerSnapshotOf,
      check: checkLedgerSnapshot,
      onRejected: (streamName, revision, problems) => this.tell((o) => o.snapshotRejected?.(streamName, revision, problems.join('; '))),
    };
  }

  /**
   * Snapshots are checked, not trusted: versioned by the fold itself, stored with a
   * digest, and checked against the stream on every load (entry count, the entry at
   * their revision, the invariants). One that fails is ignored, reported and discarded.
   */
  private readonly snapshotPolicy: SnapshotPolicy<LedgerState>;

  /** A hold's release is dated by its decision; every other entry by the event it posts for. */
  private readonly released: DatedByDecision<LedgerCommand> | undefined;

  /** Posts the request's entry, or refuses it with a LedgerError. Idempotent per cause. */
  async post(ledger: LedgerId, request: LedgerRequest): Promise<Posted> {
    const cause = causeOf(request as LedgerCommand);
    const command = { ...request, entryId: ledgerEntryId(ledger, cause) } as LedgerCommand;
    const streamName = ledgerStreamName(ledger);
    const refusals: RefusedDecision<LedgerEvent>[] = [];
    const result = await handleCommand(this.store, streamName, ledgerDecider, command, {
      eventId: (event) => event.data.entryId,
      snapshots: this.snapshotPolicy,
      // A refused entry id is a repeat; a stale decision is decided again on the ledger as it now is (handleCommand).
      onDuplicateEventId: 'already_handled',
      onDuplicateEventIdRefused: (refusal) => refusals.push(refusal),
      metadata: { accountId: ledger.accountId, mode: ledger.mode },
      dated: this.released,
      prepare: async (asked, loaded) =>
        needsCauseLookup(asked, loaded.state) ? { ...asked, postedBeforeWindow: (await this.olderEntryOf(ledger, cause, loaded.state)) !== null } : asked,
    });
    for (const refusal of refusals) await this.reportRefusedRepeat(streamName, cause, refusal);
    if (!result.ok) throw result.failure;
    return { entry: result.events[0]?.data ?? null, state: result.state, position: result.position };
  }

  /**
   * Releases the holds due by `at` that `available` needs to cover `amount`, the earliest
   * due first (holdsToRelease), RELEASES_PER_DECISION to an append to the ledger
   * (ReleaseDueHolds): a backlog of holds due together is a few appends, not one per hold. Decided on the
   * ledger as it is when appended (a hold the worker released meanwhile is no longer
   * open, so it is not released twice). Answers how many it released.
   */
  async releaseDueHolds(ledger: LedgerId, amount: Kopecks, at: string): Promise<number> {
    const request = { type: 'ReleaseDueHolds', ledger, amount, at } as const;
    const command: LedgerCommand = { ...request, entryId: ledgerEntryId(ledger, causeOf({ ...request, entryId: '' })) };
    const maxAttempts = 100;
    let released = 0;
    // In appends of at most RELEASES_PER_DECISION, each decided on the ledger as the one before left it.
    for (;;) {
      const result = await handleCommand(this.store, ledgerStreamName(ledger), ledgerDecider, command, {
        eventId: (event) => event.data.entryId,
        snapshots: this.snapshotPolicy,
        // An id already stored (a release the worker appended meanwhile): decided again on the ledger as it now is.
        onDuplicateEventId: 'already_handled',
        maxAttempts,
        metadata: { accountId: ledger.accountId, mode: ledger.mode },
        dated: this.released,
      });
      if (!result.ok) throw result.failure;
      // Every attempt lost to the worker: not "nothing due" (a reservation would then be refused for good on
      // money the holds cover), but a conflict the caller's recovery retries.
      if (result.events.length === 0 && result.attempts >= maxAttempts && holdsToRelease(await this.current(ledger), at, amount).length > 0) {
        throw new DueHoldsRaceError(ledger);
      }
      released += result.events.length;
      if (result.events.length < RELEASES_PER_DECISION) return released;
    }
  }

  /**
   * Re-reads the entry of the refused id and tells the observer how the refused
   * decision compares with it (RefusedRepeat). Rare: the entry is looked for from the
   * ledger's end, where a concurrent writer put it.
   */
  private async reportRefusedRepeat(streamName: string, cause: string, refusal: RefusedDecision<LedgerEvent>): Promise<void> {
    const refused = refusal.events[0]!.data;
    const found = await this.findFromEnd(streamName, (entry) => entry.entryId === refused.entryId);
    const stored = found ? (found.data as unknown as LedgerEvent['data']) : null;
    const outcome = stored === null || !sameMoneyDecided(refused, stored) ? 'differs' : found!.revision > refusal.decidedOn ? 'concurrent' : 'missed';
    const repeat: RefusedRepeat = { cause, outcome, decidedOn: refusal.decidedOn, storedAt: found?.revision ?? null, refused, stored };
    this.tell((o) => o.repeatRefusedByStore?.(streamName, repeat));
  }

  /** The last event of the stream whose entry matches, read backwards a page at a time; null when none does. */
  private async findFromEnd(streamName: string, matches: (entry: LedgerEvent['data']) => boolean): Promise<RecordedEvent | null> {
    let from: bigint | typeof END = END;
    for (;;) {
      let page: RecordedEvent[];
      try {
        page = await this.store.readStream(streamName, { direction: 'backwards', fromRevision: from, maxCount: CAUSE_SCAN_PAGE });
      } catch (error) {
        if (error instanceof StreamNotFoundError) return null;
        throw error;
      }
      const found = page.find((e) => matches(e.data as unknown as LedgerEvent['data']));
      if (found) return found;
      const last = page[page.length - 1];
      if (page.length < CAUSE_SCAN_PAGE || !last || last.revision === 0n) return null;
      from = last.revision - 1n;
    }
  }

  /**
   * Reserves funds for a refund or payout, or records why not, once per reservation
   * id: the first decision stands for every retry, whoever makes it (the API or a
   * recovery worker), so a request refused for want of balance can never be reserved
   * later behind the back of the flow that reported the refusal.
   */
  async reserve(
    ledger: LedgerId,
    request: Omit<Extract<LedgerRequest, { type: 'ReserveFunds' }>, 'recordRefusal'>,
    closeFinished?: ClosesFinishedPayouts,
  ): Promise<{ readonly outcome: 'reserved' } | { readonly outcome: 'refused'; readonly refusal: ReservationRefusal }> {
    const posted =
      (request.payout && closeFinished && (await this.reserveClosingFinished(ledger, request, closeFinished))) ||
      (await this.post(ledger, { ...request, recordRefusal: true }));
    const entry =
      posted.entry ??
      (Object.hasOwn(posted.state.reservations, request.reservationId) ? null : await this.entryOf(ledger, causeOf({ ...request, entryId: '' }), posted.state));
    if (entry === null || entry.kind === 'funds_reserved') return { outcome: 'reserved' };
    if (entry.kind === 'reservation_refused') return { outcome: 'refused', refusal: entry.refusal! };
    throw new Error(`Entry ${entry.entryId} of cause reserve:${request.reservationId} is ${entry.kind}`);
  }

  /**
   * A payout reservation decided without recording a refusal while the ledger would
   * refuse it as `too_many_pending` only because some of its open payout reservations
   * belong to payouts already finished in their own streams (their outcome not yet
   * moved by the payout_outcomes reactor): `closeFinished` moves those outcomes as the
   * reactor would (same commands, same causes), and the reservation is decided again,
   * each time on the ledger as it then is, so the limit stays exact under concurrency.
   * Null when the caller is to record the decision (another refusal, or no open
   * reservation found finished): that one is decided again on the ledger as it then is.
   */
  private async reserveClosingFinished(
    ledger: LedgerId,
    request: Omit<Extract<LedgerRequest, { type: 'ReserveFunds' }>, 'recordRefusal'>,
    closeFinished: ClosesFinishedPayouts,
  ): Promise<Posted | null> {
    for (let round = 0; round < CLOSING_ROUNDS; round++) {
      try {
        return await this.post(ledger, { ...request, recordRefusal: false });
      } catch (error) {
        if (!(error instanceof Refusal && error.code === 'too_many_pending')) return null;
      }
      if ((await closeFinished(openPayoutReservations(await this.current(ledger)))) === 0) return null;
    }
    return null;
  }

  /**
   * The entry a cause posted, on a ledger whose state (`state`, or a later one) says
   * it posted: a recent cause is searched from the newest entry back, an older one
   * looked up like any cause older than the window.
   */
  private async entryOf(ledger: LedgerId, cause: string, state: LedgerState): Promise<LedgerEvent['data']> {
    const streamName = ledgerStreamName(ledger);
    if (!hasRecentCause(state, cause)) {
      const found = await this.olderEntryOf(ledger, cause, state);
      if (found) return found;
      throw new Error(`No entry of cause ${cause} in ${streamName}`);
    }
    const found = await this.findFromEnd(streamName, (entry) => entry.cause === cause);
    if (!found) throw new Error(`No entry of cause ${cause} in ${streamName}`);
    return found.data as unknown as LedgerEvent['data'];
  }

  /**
   * The entry older than the state's window that posted `cause`, or null: exact for
   * any age and any event store. The index answers for the entries it holds (every
   * one up to `completeThrough`); the entries between those and the window are read
   * from the stream. So the answer is exact however far the index lags the log, and
   * after PostgreSQL is restored from a backup (the index then rolls back together
   * with what it covers). An entry the index finds that a concurrent command posted
   * after this state was loaded counts too: the cause has posted.
   */
  private async olderEntryOf(ledger: LedgerId, cause: string, state: LedgerState): Promise<LedgerEvent['data'] | null> {
    const streamName = ledgerStreamName(ledger);
    const windowStart = BigInt(entriesBeforeWindow(state));
    const indexed = await this.causes.find(ledger, cause);
    if (indexed.revision !== null) {
      const [event] = await this.store.readStream(streamName, { fromRevision: indexed.revision, maxCount: 1 });
      const data = event?.data as unknown as LedgerEvent['data'] | undefined;
      if (data?.cause === cause) {
        this.tell((o) => o.causeLookedUp?.(streamName, true, 0));
        return data;
      }
      // The index names an entry the stream does not have there: it is not derived
      // from this log (a restore of one store without the other). Trust the stream.
      return this.scanForCause(streamName, cause, 0n, windowStart);
    }
    return this.scanForCause(streamName, cause, indexed.completeThrough + 1n, windowStart);
  }

  /** Reads revisions [from, before) of the stream looking for the entry of `cause`. */
  private async scanForCause(streamName: string, cause: string, from: bigint, before: bigint): Promise<LedgerEvent['data'] | null> {
    let read = 0;
    let found: LedgerEvent['data'] | null = null;
    for (let next = from; next < before && found === null;) {
      const remaining = before - next;
      const page = await this.store.readStream(streamName, {
        fromRevision: next,
        maxCount: remaining < BigInt(CAUSE_SCAN_PAGE) ? Number(remaining) : CAUSE_SCAN_PAGE,
      });
      if (page.length === 0) break;
      read += page.length;
      found = (page.find((e) => (e.data as unknown as LedgerEvent['data']).cause === cause)?.data as unknown as LedgerEvent['data']) ?? null;
      next = page[page.length - 1]!.revision + 1n;
    }
    this.tell((o) => o.causeLookedUp?.(streamName, found !== null, read));
    return found;
  }

  private tell(call: (observer: LedgerBookObserver) => void): void {
    try {
      call(this.observer);
    } catch {
      /* an observer never breaks a command */
    }
  }

  /** Whether the ledger has an entry in the log (its stream exists), read or projected yet or not. */
  async hasEntries(ledger: LedgerId): Promise<boolean> {
    try {
      return (await this.store.readStream(ledgerStreamName(ledger), { maxCount: 1 })).length > 0;
    } catch (error) {
      if (error instanceof StreamNotFoundError) return false;
      throw error;
    }
  }

  /** The ledger's current state, from the log (snapshot plus the entries after it). */
  async current(ledger: LedgerId): Promise<LedgerState> {
    return (await loadState(this.store, ledgerStreamName(ledger), ledgerDecider, this.snapshotPolicy)).state;
  }

  /**
   * The state at a past instant, rebuilt from every entry that occurred at or before
   * it, read to the ledger's end: an entry's time is its cause's (a payment posted late
   * by the projector carries its payment's), so log order says nothing of time.
   */
  async asOf(ledger: LedgerId, instant: Date): Promise<{ state: LedgerState; lastEntryAt: string | null }> {
    let state = initialLedgerState();
    let lastEntryAt: string | null = null;
    const limit = instant.getTime();
    await this.forEachEntry(ledger, (entry) => {
      const occurredAt = Date.parse(entry.occurredAt);
      if (occurredAt > limit) return true;
      state = evolve(state, { type: 'LedgerEntryPosted', data: entry });
      if (lastEntryAt === null || occurredAt > Date.parse(lastEntryAt)) lastEntryAt = entry.occurredAt;
      return true;
    });
    return { state, lastEntryAt };
  }

  /**
   * The balances at a past instant as the log gives them (`/balance?asOf=`): the same
   * entries as `asOf`, read to the ledger's end a page at a time, their postings summed
   * (BalancesAsOfFold) without rebuilding the whole state entry by entry.
   */
  async balancesAsOf(ledger: LedgerId, instant: Date): Promise<BalancesAsOf> {
    const fold = new BalancesAsOfFold(instant);
    await this.forEachEntry(ledger, (entry) => (fold.apply(entry), true));
    return fold.result();
  }

  /**
   * Every entry of the ledger in log order from revision `from` (its `from`+1-th entry: the
   * stream holds only entries), read from its stream a page at a time (none for a ledger
   * without entries), until `visit` answers false.
   */
  async forEachEntry(ledger: LedgerId, visit: (entry: LedgerEvent['data']) => boolean, from = 0n): Promise<void> {
    for (;;) {
      let page;
      try {
        page = await this.store.readStream(ledgerStreamName(ledger), { fromRevision: from, maxCount: ENTRY_PAGE });
      } catch (error) {
        if (error instanceof StreamNotFoundError) return;
        throw error;
      }
      for (const event of page) {
        if (!visit((event as unknown as { data: LedgerEvent['data'] }).data)) return;
      }
      if (page.length < ENTRY_PAGE) return;
      from = page[page.length - 1]!.revision + 1n;
    }
  }
}

export type { LedgerError };

/**
 * A hold's release dated by its decision (the worker's ReleaseHold, a refund's or payout's ReleaseDueHolds): in the log
 * within DECIDED_TO_LOGGED_MS of its `at`, or released again, dated then (never at a stalled decision's date, in a
 * period a report may have closed meanwhile).
 */
function releasesDated(clock: Clock): DatedByDecision<LedgerCommand> {
  const byAt = decidedNow<LedgerCommand>(clock);
  return { ...byAt, at: (command) => (command.type === 'ReleaseHold' || command.type === 'ReleaseDueHolds' ? command.at : undefined) };
}
