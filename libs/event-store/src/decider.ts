import { newEventId } from './event-ids';
import type { Decider } from '#domain';
import {
  AppendTooLateError,
  DuplicateEventIdError,
  EventStore,
  EventToAppend,
  JsonObject,
  Position,
  RecordedEvent,
  streamCategory,
  StreamNotFoundError,
  WrongExpectedRevisionError,
} from './event-store';

/**
 * Watches the write side (metrics): revision conflicts and how commands end, per
 * stream category (ledger, invoice, refund, payout). Set once per process; it must
 * not throw (what it throws is ignored) and must be cheap.
 */
export interface CommandObserver {
  /** An append found the stream moved; `retrying` is false when the command gives up. */
  conflict?(category: string, retrying: boolean): void;
  /** A command ended after `attempts` decisions: events appended, nothing to append, refused by the decider, or an error thrown. */
  handled?(category: string, attempts: number, outcome: 'appended' | 'unchanged' | 'refused' | 'error'): void;
}

let commandObserver: CommandObserver | null = null;

/** Installs the process's command observer (null removes it). */
export function observeCommands(observer: CommandObserver | null): void {
  commandObserver = observer;
}

function notify(call: (observer: CommandObserver) => void): void {
  if (commandObserver === null) return;
  try {
    call(commandObserver);
  } catch {
    /* an observer never breaks a command */
  }
}

/**
 * An aggregate as pure functions (Emmett's decider): the state a stream folds into,
 * and the events a command adds to it, or the domain error that refuses it.
 */

export type { Decider };

/** Versioned snapshots of folded state: a cache, never the source of truth. */
export interface SnapshotStore {
  load(streamName: string): Promise<{ revision: bigint; schemaVersion: number; state: unknown } | null>;
  save(streamName: string, revision: bigint, schemaVersion: number, state: unknown): Promise<void>;
  /** Removes the stream's snapshot if it is still this one (a snapshot found wrong). */
  discard?(streamName: string, revision: bigint, schemaVersion: number): Promise<void>;
}

export interface SnapshotPolicy<State = unknown> {
  readonly store: SnapshotStore;
  /** Bump when the state's shape changes: older snapshots are then ignored. */
  readonly schemaVersion: number;
  /** Take a snapshot once this many events were appended since the last one. */
  readonly every: number;
  /** What is stored for a state (default: the state itself). */
  readonly encode?: (state: State) => unknown;
  /**
   * Checks a stored snapshot against its stream before it is used, given the
   * stream's event at the snapshot's revision (null when the stream has none there):
   * the state, or the problems found. A snapshot with problems is ignored (the
   * stream is folded from its start), reported to `onRejected` and discarded.
   * Without it a snapshot of the right version is used as stored.
   */
  readonly check?: (
    stored: unknown,
    revision: bigint,
    eventAtRevision: { readonly type: string; readonly data: JsonObject } | null,
  ) => { readonly state: State } | { readonly problems: readonly string[] };
  readonly onRejected?: (streamName: string, revision: bigint, problems: readonly string[]) => void;
}

export interface HandleOptions<Event, Command = unknown, State = unknown> {
  /** The id of each new event; default a random UUID. Deterministic ids make retries idempotent. */
  readonly eventId?: (event: Event, index: number) => string;
  readonly metadata?: JsonObject;
  readonly snapshots?: SnapshotPolicy<State>;
  /** How often a command is decided again on fresh state after a revision conflict. */
  readonly maxAttempts?: number;
  /**
   * An event id of this command is already stored elsewhere in the stream: the same
   * cause was handled before. 'already_handled' answers as a repeat (no new events).
   */
  readonly onDuplicateEventId?: 'throw' | 'already_handled';
  /**
   * Told when the store refused an event id it holds already: the decision refused,
   * and the revision it was made on. When the stream has moved since that revision
   * (a concurrent writer handled the same cause), the command is decided again on
   * what the stream holds now; otherwise it is answered as already handled.
   */
  readonly onDuplicateEventIdRefused?: (refusal: RefusedDecision<Event>) => void;
  /**
   * Facts from outside the stream that the decision needs (e.g. an exact index
   * lookup): asked after every load, with the state just loaded; the command it
   * returns is the one decided. The decider stays pure: the I/O happens here.
   */
  readonly prepare?: (command: Command, loaded: LoadedState<State>) => Promise<Command>;
  /**
   * The stream is expected not to exist (an id new to the gateway): the first attempt
   * decides on the initial state without reading, and appends expecting no stream; a
   * stream found there is loaded and the command decided again, as on any conflict.
   */
  readonly expectNoStream?: boolean;
  /** The command is dated by its decision: appended within `withinMs` of its date, or decided again with a fresh one. */
  readonly dated?: DatedByDecision<Command>;
}

/** How many times one command is decided again for a deadline missed: more means the store is too slow to keep any. */
export const MAX_REDATES = 5;

/**
 * A command dated with the clock's time when it is decided (a payment, a hold's release): a report
 * of a past instant counts on every entry dated by then being in the log a margin after it. The
 * append carries that deadline (AppendOptions.notAfter); a decision past it (a stall, a full pool)
 * is made again on the stream as it is then, dated then, instead of landing in a closed past.
 */
export interface DatedByDecision<Command> {
  /** The command's date (ISO 8601), or undefined: this command is not dated by its decision. */
  readonly at: (command: Command) => string | undefined;
  readonly redate: (command: Command, at: string) => Command;
  /** The clock the date comes from. */
  readonly now: () => Date;
  readonly withinMs: number;
}

/** A decision whose events the store refused because it already holds their ids. */
export interface RefusedDecision<Event> {
  readonly eventIds: readonly string[];
  /** The events decided (and not appended). */
  readonly events: readonly Event[];
  /** The revision of the stream they were decided on (-1: no stream). */
  readonly decidedOn: bigint;
}

export type HandleResult<State, Event, Failure> =
  | {
      readonly ok: true;
      readonly state: State;
      /** The events this call appended ([] for an idempotent repeat). */
      readonly events: readonly Event[];
      readonly revision: bigint;
      /** Log position of the last appended event; null when nothing was appended. */
      readonly position: Position | null;
      readonly attempts: number;
    }
  | { readonly ok: false; readonly failure: Failure; readonly state: State; readonly attempts: number };

export interface LoadedState<State> {
  readonly state: State;
  /** Revision of the last event folded; -1 for a stream that does not exist. */
  readonly revision: bigint;
  readonly snapshotRevision: bigint | null;
}

export async function loadState<State, Event extends { type: string; data: JsonObject }>(
  store: EventStore,
  streamName: string,
  decider: Pick<Decider<State, never, Event, never>, 'initialState' | 'evolve' | 'fold'>,
  snapshots?: SnapshotPolicy<State>,
): Promise<LoadedState<State>> {
  const fold = (state: State, recorded: readonly RecordedEvent[]): State => {
    const events = recorded.map((e) => ({ type: e.type, data: e.data }) as Event);
    return decider.fold ? decider.fold(state, events) : events.reduce(decider.evolve, state);
  };
  const read = async (fromRevision: bigint): Promise<RecordedEvent[]> => {
    try {
      return await store.readStream(streamName, { fromRevision });
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw error;
    }
  };

  const snapshot = snapshots ? await snapshots.store.load(streamName) : null;
  if (snapshot && snapshot.schemaVersion === snapshots!.schemaVersion) {
    if (!snapshots!.check) {
      const after = await read(snapshot.revision + 1n);
      const revision = after.length > 0 ? after[after.length - 1]!.revision : snapshot.revision;
      return { state: fold(snapshot.state as State, after), revision, snapshotRevision: snapshot.revision };
    }
    // Read from the snapshot's own revision: its event is what the snapshot is checked against.
    const recorded = await read(snapshot.revision);
    const at = recorded[0]?.revision === snapshot.revision ? recorded[0] : undefined;
    const checked = snapshots!.check(snapshot.state, snapshot.revision, at ? { type: at.type, data: at.data } : null);
    if ('state' in checked) {
      const after = at ? recorded.slice(1) : recorded;
      const revision = after.length > 0 ? after[after.length - 1]!.revision : snapshot.revision;
      return { state: fold(checked.state, after), revision, snapshotRevision: snapshot.revision };
    }
    snapshots!.onRejected?.(streamName, snapshot.revision, checked.problems);
    await snapshots!.store.discard?.(streamName, snapshot.revision, snapshot.schemaVersion).catch(() => undefined);
  }
  const recorded = await read(0n);
  const revision = recorded.length > 0 ? recorded[recorded.length - 1]!.revision : -1n;
  return { state: fold(decider.initialState(), recorded), revision, snapshotRevision: null };
}

/**
 * The whole write side of one command: load the stream, decide, append with the
 * expected revision; on a conflict decide again on fresh state. Never overwrites.
 */
export async function handleCommand<State, Command, Event extends { type: string; data: JsonObject }, Failure>(
  store: EventStore,
  streamName: string,
  decider: Decider<State, Command, Event, Failure>,
  command: Command,
  options: HandleOptions<Event, Command, State> = {},
): Promise<HandleResult<State, Event, Failure>> {
  if (commandObserver === null) return decideAndAppend(store, streamName, decider, command, options);
  const category = streamCategory(streamName);
  let attempts = 0;
  try {
    const result = await decideAndAppend(store, streamName, decider, command, options, category, (n) => (attempts = n));
    const outcome = !result.ok ? 'refused' : result.events.length > 0 ? 'appended' : 'unchanged';
    notify((o) => o.handled?.(category, result.attempts, outcome));
    return result;
  } catch (error) {
    notify((o) => o.handled?.(category, attempts, 'error'));
    throw error;
  }
}

async function decideAndAppend<State, Command, Event extends { type: string; data: JsonObject }, Failure>(
  store: EventStore,
  streamName: string,
  decider: Decider<State, Command, Event, Failure>,
  command: Command,
  options: HandleOptions<Event, Command, State>,
  category?: string,
  onAttempt?: (attempt: number) => void,
): Promise<HandleResult<State, Event, Failure>> {
  const maxAttempts = options.maxAttempts ?? 100;
  const { dated } = options;
  let redated = 0;
  /** Dated again, after a short jittered pause (a stall is load: no tight loop of reads), at most MAX_REDATES times. */
  const redate = async (late: Command, deadline: Date): Promise<Command> => {
    if (++redated > MAX_REDATES) throw new AppendTooLateError(streamName, deadline);
    await new Promise((r) => setTimeout(r, Math.random() * 20 * redated));
    return dated!.redate(late, dated!.now().toISOString());
  };
  for (let attempt = 1; ; attempt++) {
    onAttempt?.(attempt);
    const loaded: LoadedState<State> =
      attempt === 1 && options.expectNoStream
        ? { state: decider.initialState(), revision: -1n, snapshotRevision: null }
        : await loadState(store, streamName, decider, options.snapshots);
    const decision = decider.decide(options.prepare ? await options.prepare(command, loaded) : command, loaded.state);
    if (!Array.isArray(decision)) return { ok: false, failure: decision, state: loaded.state, attempts: attempt };
    if (decision.length === 0) {
      return { ok: true, state: loaded.state, events: [], revision: loaded.revision, position: null, attempts: attempt };
    }
    // The deadline of a dated decision, on this host's clock; one already past is made again, dated now.
    const date = dated?.at(command);
    const left = date === undefined ? Infinity : Date.parse(date) + dated!.withinMs - dated!.now().getTime();
    if (left <= 0) {
      command = await redate(command, new Date(Date.parse(date!) + dated!.withinMs));
      continue;
    }
    const toAppend: EventToAppend[] = decision.map((event, i) => ({
      id: options.eventId ? options.eventId(event, i) : newEventId(),
      type: event.type,
      data: event.data,
      metadata: options.metadata,
    }));
    try {
      const result = await store.appendToStream(streamName, toAppend, {
        expectedRevision: loaded.revision < 0n ? 'no_stream' : loaded.revision,
        ...(left === Infinity ? {} : { notAfter: new Date(Date.now() + left) }),
      });
      const state = decision.reduce(decider.evolve, loaded.state);
      if (options.snapshots) {
        const since = result.nextExpectedRevision - (loaded.snapshotRevision ?? -1n);
        if (since >= BigInt(options.snapshots.every)) {
          const stored = options.snapshots.encode ? options.snapshots.encode(state) : state;
          await options.snapshots.store.save(streamName, result.nextExpectedRevision, options.snapshots.schemaVersion, stored).catch(() => undefined); // a lost snapshot only costs a longer read next time
        }
      }
      return { ok: true, state, events: decision, revision: result.nextExpectedRevision, position: result.position, attempts: attempt };
    } catch (error) {
      if (error instanceof AppendTooLateError && dated) {
        command = await redate(command, error.notAfter);
        continue;
      }
      if (error instanceof DuplicateEventIdError && options.onDuplicateEventId === 'already_handled') {
        options.onDuplicateEventIdRefused?.({ eventIds: error.eventIds, events: decision, decidedOn: loaded.revision });
        // A stale decision: the stream moved after it was loaded. Decide again on what it holds now.
        const moved = attempt < maxAttempts && (await streamMovedSince(store, streamName, loaded.revision));
        if (category !== undefined && moved) notify((o) => o.conflict?.(category, true));
        if (moved) continue;
        return { ok: true, state: loaded.state, events: [], revision: loaded.revision, position: null, attempts: attempt };
      }
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      // Not new after all (a repeat, or a concurrent writer won): load it and decide again.
      if (attempt === 1 && options.expectNoStream) continue;
      if (category !== undefined) notify((o) => o.conflict?.(category, attempt < maxAttempts));
      if (attempt >= maxAttempts) throw error;
      // Someone appended first: decide again on their result, after a short jittered pause.
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(2 * attempt, 20)));
    }
  }
}

/** Whether the stream holds an event after `revision` (-1: whether it exists). */
async function streamMovedSince(store: EventStore, streamName: string, revision: bigint): Promise<boolean> {
  try {
    return (await store.readStream(streamName, { fromRevision: revision + 1n, maxCount: 1 })).length > 0;
  } catch (error) {
    if (error instanceof StreamNotFoundError) return false;
    throw error;
  }
}
