import { CHAIN_HASH_BYTES, ChainedEventContent, eventChainHash, nextLogHash, RunningLogHash } from './hash-chain';

/**
 * What a verification of the log found (pure: the adapters feed the events in).
 *
 * - `data_changed`: an event's content (stream, revision, id, type, data, metadata) no
 *   longer gives its stored chain hash, while the chain goes on from that stored hash;
 * - `event_missing`: a revision of a stream is absent (a gap, or the stream's head is
 *   past its last event), or an event a checkpoint covered is gone from the log;
 * - `order_changed`: two events of a stream carry each other's content, a stream's
 *   revisions are out of order in the log, or the log holds a checkpointed event at
 *   another place than the checkpoint recorded;
 * - `chain_hash_mismatch`: a stored chain hash is not the one its content gives and the
 *   chain goes on from the right one (the hash was edited), an event has no chain hash,
 *   or the log no longer gives a recorded checkpoint's running hash (also: an event at
 *   the place a checkpoint recorded, changed and its chain hash recomputed).
 */
export type LogProblemKind = 'data_changed' | 'event_missing' | 'order_changed' | 'chain_hash_mismatch';

export interface LogProblem {
  readonly kind: LogProblemKind;
  readonly streamName: string | null;
  readonly revision: bigint | null;
  /** The global position (`commit/prepare`) of the event named, when there is one. */
  readonly position: string | null;
  readonly detail: string;
}

/** Reports a problem; `contentDiffers`: the event it names does not give its stored chain hash from its content. */
type ProblemReport = (problem: LogProblem, contentDiffers?: boolean) => void;

/** Where a problem goes, and the problems whose event's content does not give its stored chain hash (`contentDiffers`, also among `problems`). */
function reporterInto(problems: LogProblem[], contentDiffers: LogProblem[]): ProblemReport {
  return (problem, differs = false) => {
    problems.push(problem);
    if (differs) contentDiffers.push(problem);
  };
}

/** An event as the stream check needs it: what its chain hash covers, and the hash stored with it. */
export interface StoredChainedEvent extends ChainedEventContent {
  readonly position: string;
  /** null: the event has no chain hash. */
  readonly storedHash: Buffer | null;
}

interface Mismatch {
  readonly event: StoredChainedEvent;
  readonly previousStored: Buffer | null;
  readonly recomputed: Buffer;
}

/**
 * What two events may have exchanged: whole events (id, type, data and metadata moved
 * to each other's revision) or their data alone.
 */
const EXCHANGES: readonly { readonly what: string; exchange(into: StoredChainedEvent, from: StoredChainedEvent): ChainedEventContent }[] = [
  { what: 'events', exchange: (into, from) => ({ ...from, streamName: into.streamName, revision: into.revision }) },
  { what: 'data', exchange: (into, from) => ({ ...into, dataJson: from.dataJson }) },
];

/** Whether `a` and `b` hold each other's content in the way `exchange` says (each then hashes to the other's stored place). */
function exchanged(a: Mismatch, b: Mismatch, exchange: (typeof EXCHANGES)[number]['exchange']): boolean {
  return (
    eventChainHash(a.previousStored, exchange(a.event, b.event)).equals(a.event.storedHash!) &&
    eventChainHash(b.previousStored, exchange(b.event, a.event)).equals(b.event.storedHash!)
  );
}

/** Beyond this many unexplained mismatches in one stream, each is reported at once (memory stays bounded). */
const PENDING_PER_STREAM = 256;

/**
 * One stream's chain, fed its events in revision order. Each event's hash is
 * recomputed from the stored hash of its predecessor, so one changed event shows as
 * one mismatch; a mismatch is then explained by what follows: a successor chained from
 * the recomputed hash (the stored hash was edited), another mismatch of the stream with
 * which it swapped content (order changed), or else, when the stream ends, its data was
 * changed. Memory: the last stored hash, and the stream's unexplained mismatches.
 */
class StreamChain {
  private previousMismatch: Mismatch | null = null;
  private pending: Mismatch[] | null = null;

  /**
   * `expectedRevision` and `previousStored`: where the stream's chain stands (a new stream: 0 and null).
   * `report`'s `contentDiffers`: the event named is one whose content does not give its stored chain hash.
   */
  constructor(
    private readonly report: ProblemReport,
    public expectedRevision = 0n,
    private previousStored: Buffer | null = null,
  ) {}

  event(event: StoredChainedEvent): void {
    const previousMismatch = this.previousMismatch;
    this.previousMismatch = null;
    if (event.revision > this.expectedRevision) {
      const first = this.expectedRevision;
      const last = event.revision - 1n;
      this.report({
        kind: 'event_missing',
        streamName: event.streamName,
        revision: first,
        position: event.position,
        detail: `${first === last ? `revision ${first} is` : `revisions ${first}–${last} are`} missing from the stream; the next event present is revision ${event.revision} at position ${event.position}`,
      });
    } else if (event.storedHash === null) {
      this.report({ ...named(event), kind: 'chain_hash_mismatch', detail: 'the event has no chain hash' }, true);
    } else {
      const recomputed = eventChainHash(this.previousStored, event);
      if (!recomputed.equals(event.storedHash)) this.mismatch({ event, previousStored: this.previousStored, recomputed }, previousMismatch);
    }
    this.expectedRevision = event.revision + 1n;
    this.previousStored = event.storedHash;
  }

  /** After the stream's last event: its unexplained mismatches are changed data. */
  end(): void {
    for (const m of this.pending ?? []) this.reportDataChanged(m);
    this.pending = null;
    this.previousMismatch = null;
  }

  private mismatch(current: Mismatch, previousMismatch: Mismatch | null): void {
    const pending = (this.pending ??= []);
    // The predecessor's stored hash was edited: this event chains from what its content gives.
    if (
      previousMismatch &&
      pending.includes(previousMismatch) &&
      eventChainHash(previousMismatch.recomputed, current.event).equals(current.event.storedHash!)
    ) {
      this.pending = pending.filter((m) => m !== previousMismatch);
      this.report(
        {
          ...named(previousMismatch.event),
          kind: 'chain_hash_mismatch',
          detail: `its stored chain hash ${hex(previousMismatch.event.storedHash)} is not the ${hex(previousMismatch.recomputed)} its content gives (the next event chains from the latter)`,
        },
        true,
      );
      return;
    }
    // Two events of the stream carry each other's content.
    for (const { what, exchange } of EXCHANGES) {
      const partner = pending.find((m) => exchanged(m, current, exchange));
      if (!partner) continue;
      this.pending = pending.filter((m) => m !== partner);
      this.report(
        {
          ...named(partner.event),
          kind: 'order_changed',
          detail: `revisions ${partner.event.revision} (position ${partner.event.position}) and ${current.event.revision} (position ${current.event.position}) hold each other's ${what}`,
        },
        true,
      );
      return;
    }
    if (pending.length >= PENDING_PER_STREAM) {
      this.reportDataChanged(current);
      return;
    }
    pending.push(current);
    this.previousMismatch = current;
  }

  private reportDataChanged(m: Mismatch): void {
    this.report(
      {
        ...named(m.event),
        kind: 'data_changed',
        detail: `its content gives chain hash ${hex(m.recomputed)}, not the stored ${hex(m.event.storedHash)}`,
      },
      true,
    );
  }
}

/**
 * Checks each stream's chain (StreamChain): fed every event of every stream, stream
 * after stream, each stream in revision order. Memory: the current stream's unexplained
 * mismatches.
 */
export class StreamChainCheck {
  readonly problems: LogProblem[] = [];
  /** The problems naming an event whose content does not give its stored chain hash (the running hash folds the stored ones). */
  readonly contentDiffers: LogProblem[] = [];
  private readonly report = reporterInto(this.problems, this.contentDiffers);
  private stream: string | null = null;
  private chain: StreamChain | null = null;
  streams = 0;
  events = 0;

  event(event: StoredChainedEvent): void {
    if (event.streamName !== this.stream || this.chain === null) {
      this.chain?.end();
      this.stream = event.streamName;
      this.chain = new StreamChain(this.report);
      this.streams += 1;
    }
    this.events += 1;
    this.chain.event(event);
  }

  /** The stream's head as the store records it (its last revision and chain hash): checked against the events seen. */
  streamHead(streamName: string, headRevision: bigint, lastEvent: { revision: bigint; position: string } | null): void {
    if (lastEvent === null || lastEvent.revision < headRevision) {
      const first = lastEvent === null ? 0n : lastEvent.revision + 1n;
      this.problems.push({
        kind: 'event_missing',
        streamName,
        revision: first,
        position: null,
        detail: `the stream's head is revision ${headRevision}, but its events end ${lastEvent === null ? 'before revision 0' : `at revision ${lastEvent.revision} (position ${lastEvent.position})`}`,
      });
    }
  }

  /** After the last event. */
  finish(): void {
    this.chain?.end();
    this.chain = null;
  }
}

/**
 * The per-stream records of a check of the whole log, compact: a slot per stream
 * (`slotOf`), and the record's numbers and hashes in typed arrays grown by doubling, so
 * that a log of a million events in a quarter of a million streams costs a few tens of
 * MiB, not one object per stream (nor a pooled 8 KiB slab kept alive by each stream's
 * last hash).
 */
class StreamSlots {
  private readonly slots = new Map<string, number>();
  private capacity = 1024;
  /** Per slot: a number (a revision: far below 2^53). */
  numbers = new Float64Array(this.capacity);
  /** Per slot: a 32-byte hash, and whether it is set (none kept when `withHashes` is false). */
  hashes: Buffer;
  hashSet: Uint8Array;

  constructor(private readonly withHashes = true) {
    this.hashes = Buffer.alloc(withHashes ? this.capacity * CHAIN_HASH_BYTES : 0);
    this.hashSet = new Uint8Array(withHashes ? this.capacity : 0);
  }

  get size(): number {
    return this.slots.size;
  }

  /** The stream's slot; a new one (number 0, no hash) for a stream not seen before. */
  slotOf(streamName: string): number {
    let slot = this.slots.get(streamName);
    if (slot === undefined) {
      slot = this.slots.size;
      if (slot === this.capacity) this.grow();
      this.slots.set(streamName, slot);
    }
    return slot;
  }

  /** The slot of a stream seen before, else undefined. */
  find(streamName: string): number | undefined {
    return this.slots.get(streamName);
  }

  hash(slot: number): Buffer | null {
    return this.hashSet[slot] === 1 ? this.hashes.subarray(slot * CHAIN_HASH_BYTES, (slot + 1) * CHAIN_HASH_BYTES) : null;
  }

  /** Keeps a copy of `hash` (null: none) in the slot. */
  setHash(slot: number, hash: Buffer | null): void {
    if (hash === null || hash.length !== CHAIN_HASH_BYTES) {
      this.hashSet[slot] = 0;
      return;
    }
    hash.copy(this.hashes, slot * CHAIN_HASH_BYTES);
    this.hashSet[slot] = 1;
  }

  private grow(): void {
    this.capacity *= 2;
    const numbers = new Float64Array(this.capacity);
    numbers.set(this.numbers);
    this.numbers = numbers;
    if (!this.withHashes) return;
    const hashes = Buffer.alloc(this.capacity * CHAIN_HASH_BYTES);
    this.hashes.copy(hashes);
    const hashSet = new Uint8Array(this.capacity);
    hashSet.set(this.hashSet);
    [this.hashes, this.hashSet] = [hashes, hashSet];
  }
}

/** Events of one stream held back while an earlier revision is still to come (beyond this, the gap is reported). */
const WAITING_PER_STREAM = 256;

/**
 * The same checks as StreamChainCheck, fed the log in log order (streams interleaved):
 * every stream's chain is followed at once, so one read of the log in log order serves
 * both this check and LogOrderCheck. In a log as the stores write it each stream's
 * revisions ascend in the log; an event that comes before an earlier revision of its
 * stream (an order LogOrderCheck reports) is held back until that revision has come, at
 * most WAITING_PER_STREAM of them, so the chain is still checked in revision order and
 * reports what StreamChainCheck reports. A revision that never comes is reported
 * missing when the stream's held-back events overflow or at the end; a revision that
 * comes after its stream's chain went past it is left to LogOrderCheck. (The
 * PostgreSQL verification feeds it only the streams its read flags, one at a time:
 * StreamsCheckedAgain.)
 *
 * Memory: per stream, its next revision and last stored hash (StreamSlots); a stream
 * whose chain breaks (a mismatch, a gap, an event without hash) is followed from there
 * by a StreamChain of its own, with its unexplained mismatches; and the held-back events
 * of streams out of order.
 */
export class StreamChainsInLogOrder {
  readonly problems: LogProblem[] = [];
  /** As StreamChainCheck's. */
  readonly contentDiffers: LogProblem[] = [];
  private readonly slots = new StreamSlots();
  /** Streams whose chain broke somewhere: followed by a StreamChain from there on. */
  private readonly broken = new Map<string, StreamChain>();
  /** Per stream, the events that came before an earlier revision, in revision order. */
  private readonly waiting = new Map<string, StoredChainedEvent[]>();
  private readonly report = reporterInto(this.problems, this.contentDiffers);
  events = 0;

  get streams(): number {
    return this.slots.size;
  }

  /** The next event of the log; answers its stream's slot (streams numbered from 0 in the order they first appear). */
  event(event: StoredChainedEvent): number {
    this.events += 1;
    const slot = this.slots.slotOf(event.streamName);
    const expected = BigInt(this.slots.numbers[slot]!);
    if (event.revision === expected) {
      this.follow(slot, event);
      const held = this.waiting.get(event.streamName);
      if (held) this.release(slot, event.streamName, held, false);
    } else if (event.revision > expected) {
      const held = this.waiting.get(event.streamName) ?? [];
      let at = held.length;
      while (at > 0 && held[at - 1]!.revision > event.revision) at--;
      held.splice(at, 0, event);
      this.waiting.set(event.streamName, held);
      if (held.length > WAITING_PER_STREAM) this.release(slot, event.streamName, held, true);
    }
    return slot;
  }

  /** After the last event of the log. */
  finish(): void {
    for (const [streamName, held] of this.waiting) this.release(this.slots.find(streamName)!, streamName, held, true);
    for (const chain of this.broken.values()) chain.end();
  }

  /** The stream's next event in revision order (or, at a gap, the first after it). */
  private follow(slot: number, event: StoredChainedEvent): void {
    let chain = this.broken.get(event.streamName);
    if (chain === undefined) {
      const previous = this.slots.hash(slot);
      const expected = BigInt(this.slots.numbers[slot]!);
      if (event.revision === expected && event.storedHash !== null && eventChainHash(previous, event).equals(event.storedHash)) {
        this.slots.numbers[slot] = Number(event.revision + 1n);
        this.slots.setHash(slot, event.storedHash);
        return;
      }
      // The chain breaks here: from now on this stream is followed event by event, with its mismatches.
      chain = new StreamChain(this.report, expected, previous === null ? null : Buffer.from(previous));
      this.broken.set(event.streamName, chain);
    }
    chain.event(event);
    this.slots.numbers[slot] = Number(chain.expectedRevision);
  }

  /** Feeds the held-back events that now follow the chain (all of them when `all`: a gap before the first is reported). */
  private release(slot: number, streamName: string, held: StoredChainedEvent[], all: boolean): void {
    while (held.length > 0 && (all || held[0]!.revision === BigInt(this.slots.numbers[slot]!))) this.follow(slot, held.shift()!);
    if (held.length === 0) this.waiting.delete(streamName);
  }
}

/** A checkpoint as recorded: it covers the events after `fromEvents` up to `events`, whose chain hashes it keeps in log order. */
export interface RecordedCheckpoint {
  readonly seq: bigint;
  /** Events of the log before this checkpoint's segment. */
  readonly fromEvents: bigint;
  readonly events: bigint;
  readonly position: string;
  readonly hash: Buffer;
  /** The chain hashes of the segment's events, 32 bytes each, in log order. */
  readonly eventHashes: Buffer;
}

export interface LoggedEvent {
  readonly streamName: string;
  readonly revision: bigint;
  readonly position: string;
  readonly chainHash: Buffer | null;
}

/**
 * Events of the log in columns, as a read of the log hands them on (the PostgreSQL
 * read's pages): what LogOrderCheck needs of the i-th event, its chain hash at i × 32
 * of `chainHashes` (none where `hashless[i]` is 1), without an object per event; the
 * event as an object only for a problem.
 */
export interface LoggedColumns {
  readonly chainHashes: Buffer;
  readonly hashless: Uint8Array;
  event(i: number): LoggedEvent;
}

/** One event as columns (a check fed event by event). */
function columnsOf(event: LoggedEvent): LoggedColumns {
  const hashed = event.chainHash !== null && event.chainHash.length === CHAIN_HASH_BYTES;
  return { chainHashes: hashed ? event.chainHash! : NO_HASH, hashless: hashed ? HASHED : HASHLESS, event: () => event };
}
const NO_HASH = Buffer.alloc(CHAIN_HASH_BYTES);
const HASHED = new Uint8Array([0]);
const HASHLESS = new Uint8Array([1]);

/**
 * Checks the log in log order: the running hash reproduces every recorded checkpoint,
 * and (fed by `event`) each stream's revisions ascend. After a checkpoint the log does
 * not reproduce, each later one is judged on its own segment, folded from the hash
 * recorded before it (`runningHash` stays the log's own). Fed the events in log order,
 * with each checkpoint handed in (`checkpoint`) before the first event of its segment.
 * Memory: one checkpoint's segment, and with `event` one entry per stream; a read of
 * the log that finds the streams out of order itself feeds `eventInColumns`, which
 * keeps nothing per stream (the PostgreSQL read: each event is checked against its
 * stream's previous revision, and the streams it flags are checked again,
 * StreamsCheckedAgain).
 */
export class LogOrderCheck {
  readonly problems: LogProblem[] = [];
  /** Per stream: its last revision in the log plus one (0: none yet), and that event's position. */
  private readonly lastOfStream = new StreamSlots(false);
  private readonly lastPositions: string[] = [];
  private readonly running = new RunningLogHash();
  private count = 0n;
  private segment: RecordedCheckpoint | null = null;
  /**
   * What the open segment is judged from once the log diverged (null: the log's own
   * running hash): the checkpoint before it, whose recorded hash it is folded from, so
   * that each later checkpoint fails only for a change in its own segment.
   */
  private segmentBase: RecordedCheckpoint | null = null;
  /** The recorded checkpoint last compared. */
  private lastCompared: RecordedCheckpoint | null = null;
  /** A recorded checkpoint was not reproduced: the log's running hash differs from the recorded ones from there on. */
  private diverged = false;
  /** The events of the segment: each as the columns it is in and its row there. */
  private segmentColumns: LoggedColumns[] = [];
  private segmentRows: number[] = [];
  /**
   * The checkpoints starting after more events than the log has, since its last event: their
   * lines stand in `problems` in log order, and are taken out if the log ends first (it lost them).
   */
  private startsAfter: LogProblem[] = [];
  /**
   * The first range that ended early with no event of the log after it (its line, and the recorded
   * events it still has): the log ends there if no event comes, and lost the recorded events after.
   */
  private cut: { line: LogProblem; through: bigint; events: bigint; count: bigint } | null = null;
  private recordedEnd = 0n;
  checkpointsCompared = 0;

  get events(): bigint {
    return this.count;
  }

  get runningHash(): Buffer {
    return this.running.bytes;
  }

  checkpoint(checkpoint: RecordedCheckpoint): void {
    this.closeSegment();
    this.segment = checkpoint;
    this.segmentColumns = [];
    this.segmentRows = [];
    const previous = this.lastCompared;
    this.segmentBase = this.diverged && previous && previous.events === checkpoint.fromEvents ? previous : null;
    if (checkpoint.events > this.recordedEnd) this.recordedEnd = checkpoint.events;
    if (checkpoint.fromEvents !== this.count) {
      const problem: LogProblem = {
        kind: 'chain_hash_mismatch',
        streamName: null,
        revision: null,
        position: checkpoint.position,
        detail: `checkpoint ${checkpoint.seq} starts after event ${checkpoint.fromEvents}, the log has ${this.count} before it`,
      };
      // Fewer events than its start: kept only if another event comes; a log that ends first lost them (the cut's line counts them).
      if (checkpoint.fromEvents > this.count) this.startsAfter.push(problem);
      this.problems.push(problem);
    }
  }

  /** The next event of the log, its stream's revisions checked to ascend (a check is fed either this way or by `eventInColumns`, never both). */
  event(event: LoggedEvent): void {
    const slot = this.lastOfStream.slotOf(event.streamName);
    const revision = Number(event.revision);
    const lastPlusOne = this.lastOfStream.numbers[slot]!;
    if (lastPlusOne > 0 && revision < lastPlusOne) {
      this.problems.push({
        ...named(event),
        kind: 'order_changed',
        detail: `revision ${revision} comes after revision ${lastPlusOne - 1} (position ${this.lastPositions[slot]}) in the log`,
      });
    } else {
      this.lastOfStream.numbers[slot] = revision + 1;
      this.lastPositions[slot] = event.position;
    }
    this.eventInColumns(columnsOf(event), 0);
  }

  /** The next event of the log: row `i` of `columns` (its stream's order is not checked here). */
  eventInColumns(columns: LoggedColumns, i: number): void {
    if (this.startsAfter.length > 0) this.startsAfter = [];
    this.running.add(columns.hashless[i] === 1 ? null : columns.chainHashes, i * CHAIN_HASH_BYTES);
    this.count += 1n;
    if (this.segment) {
      this.segmentColumns.push(columns);
      this.segmentRows.push(i);
      if (this.count === this.segment.events) this.closeSegment();
    }
  }

  finish(): void {
    this.closeSegment();
    // The log ended before these checkpoints' ranges: not "starts after", the cut's line counts their events.
    const lost = new Set(this.startsAfter);
    for (let i = this.problems.length - 1; i >= 0; i--) if (lost.has(this.problems[i]!)) this.problems.splice(i, 1);
    this.startsAfter = [];
    // A cut tail crossing checkpoints (no event after the range that ended early): its line says how many recorded events are gone in all.
    const cut = this.cut;
    if (cut && cut.count === this.count && this.recordedEnd > cut.events) {
      const at = this.problems.indexOf(cut.line);
      this.problems[at] = {
        ...cut.line,
        detail: `${cut.line.detail}; ${this.recordedEnd - cut.through} recorded event(s) are gone in all, events ${cut.through + 1n} to ${this.recordedEnd}`,
      };
    }
  }

  private closeSegment(): void {
    const segment = this.segment;
    if (!segment) return;
    this.segment = null;
    this.checkpointsCompared += 1;
    const columns = this.segmentColumns;
    const rows = this.segmentRows;
    this.segmentColumns = [];
    this.segmentRows = [];
    const base = this.segmentBase;
    this.segmentBase = null;
    const differsAt = firstDifference(segment.eventHashes, columns, rows);
    this.lastCompared = segment;
    if (differsAt !== null) {
      this.diverged = true;
      const recorded: Buffer[] = [];
      for (let at = 0; at + CHAIN_HASH_BYTES <= segment.eventHashes.length; at += CHAIN_HASH_BYTES) {
        recorded.push(segment.eventHashes.subarray(at, at + CHAIN_HASH_BYTES));
      }
      const problem = explain(
        segment,
        recorded,
        rows.map((row, k) => columns[k]!.event(row)),
        differsAt,
      );
      // The range ended early: the log ends there if no event comes after it (finish). Later ranges with no event keep the first.
      if (problem.kind === 'event_missing' && this.count < segment.events && rows.length < recorded.length && this.cut?.count !== this.count) {
        this.cut = { line: problem, through: segment.fromEvents + BigInt(rows.length), events: segment.events, count: this.count };
      }
      this.problems.push(problem);
      return;
    }
    const lastEvent = rows.length === 0 ? undefined : columns[rows.length - 1]!.event(rows[rows.length - 1]!);
    // After a checkpoint not reproduced, the log's running hash carries that change: this segment is judged from the recorded hash.
    const running = base === null ? this.running.bytes : foldedFrom(base.hash, columns, rows);
    if (this.count !== segment.events || !running.equals(segment.hash) || (lastEvent && lastEvent.position !== segment.position)) {
      this.diverged = true;
      this.problems.push({
        kind: 'chain_hash_mismatch',
        streamName: lastEvent?.streamName ?? null,
        revision: lastEvent?.revision ?? null,
        position: lastEvent?.position ?? null,
        detail: `the log gives running hash ${hex(running)} after ${this.count} events at position ${lastEvent?.position ?? '0/0'}${base === null ? '' : ` (folded from the hash checkpoint ${base.seq} recorded)`}; checkpoint ${segment.seq} recorded ${hex(segment.hash)} after ${segment.events} at ${segment.position}`,
      });
    }
  }
}

/** The running hash from `base` folded over the segment's events (their stored chain hashes). */
function foldedFrom(base: Buffer, columns: readonly LoggedColumns[], rows: readonly number[]): Buffer {
  let hash = base;
  for (let k = 0; k < rows.length; k++) {
    const i = rows[k]!;
    const c = columns[k]!;
    hash = nextLogHash(hash, c.hashless[i] === 1 ? NO_HASH : c.chainHashes.subarray(i * CHAIN_HASH_BYTES, (i + 1) * CHAIN_HASH_BYTES));
  }
  return hash;
}

/**
 * The first place where the log differs from a checkpoint's segment: a recorded event
 * no longer in the log (missing), an event the checkpoint recorded elsewhere (order
 * changed), or one it never recorded there (chain hash mismatch: inserted or edited;
 * also an event changed at its recorded place, its chain hash recomputed).
 */
function explain(segment: RecordedCheckpoint, recorded: readonly Buffer[], logged: readonly LoggedEvent[], at: number): LogProblem {
  const index = (i: number) => segment.fromEvents + BigInt(i) + 1n;
  const expected = recorded[at];
  const found = logged[at];
  const expectedInLog = expected === undefined ? -1 : logged.findIndex((e) => e.chainHash !== null && e.chainHash.equals(expected));
  if (expected !== undefined && expectedInLog < 0 && found && changedInPlace(segment, recorded, logged, at)) {
    return {
      ...named(found),
      kind: 'chain_hash_mismatch',
      detail: `checkpoint ${segment.seq} recorded chain hash ${hex(expected)} as event ${index(at)} of the log; the event in its place now has chain hash ${hex(found.chainHash)}: changed (or replaced) and re-hashed since`,
    };
  }
  // The log lost events of the range when it holds fewer of them than the checkpoint recorded.
  const lacks = recorded.length - logged.length;
  if (expected !== undefined && expectedInLog < 0 && !found) {
    // The range ends early: every recorded event from `at` on is gone (named at the last event the log still has).
    const last = logged[logged.length - 1];
    return {
      kind: 'event_missing',
      streamName: null,
      revision: null,
      position: last?.position ?? null,
      detail: `${lacks} event(s) checkpoint ${segment.seq} recorded are not in the log, events ${index(at)} to ${segment.events} (the last with chain hash ${hex(recorded[recorded.length - 1]!)}): its range ends ${last ? `at event ${index(logged.length - 1)}, ${describe(last)}` : 'before them'} (deleted, or moved out of the range)`,
    };
  }
  if (expected !== undefined && expectedInLog < 0) {
    return {
      kind: 'event_missing',
      streamName: null,
      revision: null,
      position: found!.position,
      detail: `event ${index(at)} of the log, chain hash ${hex(expected)} in checkpoint ${segment.seq}, is not in this range of the log (deleted, or moved out of the range); in its place is ${describe(found!)}${lacks > 0 ? `; the range holds ${lacks} event(s) fewer than the checkpoint recorded` : ''}`,
    };
  }
  const foundInRecord = found?.chainHash ? recorded.findIndex((h) => h.equals(found.chainHash!)) : -1;
  if (found && foundInRecord >= 0) {
    return {
      ...named(found),
      kind: 'order_changed',
      detail: `checkpoint ${segment.seq} recorded it as event ${index(foundInRecord)} of the log; it is now event ${index(at)}`,
    };
  }
  return {
    ...named(found!),
    kind: 'chain_hash_mismatch',
    detail: `checkpoint ${segment.seq} recorded no event with its chain hash ${hex(found!.chainHash)} at this place of the log`,
  };
}

/**
 * Whether the events from `at` on hold the places the checkpoint recorded, each the one
 * recorded there or one recorded nowhere in the segment in place of one not in the log
 * (changed in place), and the segment ends at the recorded position: nothing deleted,
 * inserted or moved, so the event at `at` is the recorded one, changed.
 */
function changedInPlace(segment: RecordedCheckpoint, recorded: readonly Buffer[], logged: readonly LoggedEvent[], at: number): boolean {
  if (logged.length !== recorded.length || logged[logged.length - 1]!.position !== segment.position) return false;
  const inLog = new Set(logged.map((e) => e.chainHash?.toString('hex')));
  const inRecord = new Set(recorded.map((h) => h.toString('hex')));
  for (let j = at; j < logged.length; j++) {
    const hash = logged[j]!.chainHash;
    if (hash !== null && hash.equals(recorded[j]!)) continue;
    if (inLog.has(recorded[j]!.toString('hex')) || (hash !== null && inRecord.has(hash.toString('hex')))) return false;
  }
  return true;
}

/** Where the recorded chain hashes (32 bytes each) and the segment's events first differ, or null. */
function firstDifference(recorded: Buffer, columns: readonly LoggedColumns[], rows: readonly number[]): number | null {
  const length = Math.max(recorded.length / CHAIN_HASH_BYTES, rows.length);
  for (let k = 0; k < length; k++) {
    const at = k * CHAIN_HASH_BYTES;
    if (at + CHAIN_HASH_BYTES > recorded.length || k >= rows.length) return k;
    const c = columns[k]!;
    const i = rows[k]!;
    if (c.hashless[i] === 1 || recorded.compare(c.chainHashes, i * CHAIN_HASH_BYTES, (i + 1) * CHAIN_HASH_BYTES, at, at + CHAIN_HASH_BYTES) !== 0) return k;
  }
  return null;
}

/**
 * The exact checks of the streams a read of the log flagged (an event of theirs that
 * did not simply go on its stream's chain, see verifyEventLog on PostgreSQL): each
 * stream's events in log order, stream after stream, checked by StreamChainsInLogOrder
 * and by LogOrderCheck's order of revisions, as if the whole log had been fed to them
 * (they keep nothing across streams, so a stream's problems are those they find in the
 * whole log). Memory: one stream's held-back events and mismatches.
 */
export class StreamsCheckedAgain {
  readonly problems: LogProblem[] = [];
  /** As StreamChainCheck's. */
  readonly contentDiffers: LogProblem[] = [];
  /**
   * The streams checked less their events at revision 0: what a count of the log's
   * streams by their events at revision 0 misses of these (a stream whose first events
   * are gone) or counts twice (a revision 0 twice).
   */
  streamsLessRevisionZeros = 0;
  private stream: string | null = null;
  private chains = new StreamChainsInLogOrder();
  private order = new LogOrderCheck();

  /** The next event: of the stream of the one before, or the first of the next stream. */
  event(event: StoredChainedEvent): void {
    if (event.streamName !== this.stream) {
      this.close();
      this.stream = event.streamName;
      this.streamsLessRevisionZeros += 1;
    }
    if (event.revision === 0n) this.streamsLessRevisionZeros -= 1;
    this.chains.event(event);
    this.order.event({ streamName: event.streamName, revision: event.revision, position: event.position, chainHash: event.storedHash });
  }

  finish(): void {
    this.close();
    this.stream = null;
  }

  private close(): void {
    if (this.stream === null) return;
    this.chains.finish();
    this.order.finish();
    this.problems.push(...this.chains.problems, ...this.order.problems);
    this.contentDiffers.push(...this.chains.contentDiffers);
    this.chains = new StreamChainsInLogOrder();
    this.order = new LogOrderCheck();
  }
}

const named = (event: { streamName: string; revision: bigint; position: string }) => ({
  streamName: event.streamName,
  revision: event.revision,
  position: event.position,
});

const describe = (event: LoggedEvent) => `${event.streamName} revision ${event.revision} (position ${event.position})`;

const hex = (hash: Buffer | null): string => (hash === null ? 'none' : hash.toString('hex').slice(0, 16));

/** The first problem in log terms: the earliest-named of them (problems without a position last). */
export function describeProblem(problem: LogProblem): string {
  // A part that does not apply is left out (an event gone from the log has no stream here: its detail names it).
  const where = problem.streamName === null ? '' : ` ${problem.streamName}${problem.revision === null ? '' : ` revision ${problem.revision}`}`;
  const at = problem.position === null ? '' : ` at position ${problem.position}`;
  return `[${problem.kind}]${where}${at}: ${problem.detail}`;
}
