import type { Pool } from 'pg';

/**
 * The event store port. It has EventStoreDB's semantics so that the PostgreSQL
 * adapter (default) and the EventStoreDB adapter pass one contract suite:
 *
 * - streams are named `<category>-<id>`;
 * - an append states what it expects of the stream (no stream, any, stream exists,
 *   or an exact revision) and carries client-chosen event ids; a retried append
 *   with the same ids succeeds again without writing the events twice;
 * - streams are read forwards and backwards;
 * - the global log (`$all`) is read and subscribed to from an exclusive position,
 *   catch-up first, then live.
 */

/** Where an event sits in the global log. Opaque outside the adapter; ordered by (commit, prepare). */
export interface Position {
  readonly commit: bigint;
  readonly prepare: bigint;
}

export const START = 'start' as const;
export const END = 'end' as const;

export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | bigint;

export type JsonObject = { readonly [key: string]: unknown };

export interface EventToAppend<Type extends string = string, Data extends JsonObject = JsonObject> {
  /** A UUID chosen by the caller; the idempotency key of the append. */
  readonly id: string;
  readonly type: Type;
  readonly data: Data;
  readonly metadata?: JsonObject;
}

export interface RecordedEvent<Type extends string = string, Data extends JsonObject = JsonObject> {
  readonly id: string;
  readonly type: Type;
  readonly streamName: string;
  /** 0 for a stream's first event. */
  readonly revision: bigint;
  readonly data: Data;
  readonly metadata: JsonObject;
  readonly position: Position;
  readonly createdAt: Date;
}

export interface AppendResult {
  /** The revision of the last event now in the stream: the next append's expected revision. */
  readonly nextExpectedRevision: bigint;
  /** The global position of the last event of this append. */
  readonly position: Position;
}

export interface ReadStreamOptions {
  readonly direction?: 'forwards' | 'backwards';
  /** Inclusive. Default: start when reading forwards, end when reading backwards. */
  readonly fromRevision?: bigint | typeof START | typeof END;
  readonly maxCount?: number;
}

export interface ReadAllOptions {
  /** Exclusive: the first event returned comes after this position. */
  readonly after?: Position | typeof START;
  readonly maxCount?: number;
}

export interface AllFilter {
  /** Keep events whose stream name starts with one of these. */
  readonly streamNamePrefixes?: readonly string[];
  /** Keep events whose type starts with one of these. */
  readonly eventTypePrefixes?: readonly string[];
}

/**
 * What a read of the log through readAllThrough hands over, for a reader that wants
 * part of it (a rebuild of some of the projections): the events that match one of
 * `matching` (all when absent), and of those, the data of the events that match one of
 * `withDataOf` (all when absent). An event outside `withDataOf` comes with `{}` as its
 * data: for readers that look at its stream, type, revision, position and time only.
 */
export interface LogReadScope {
  readonly matching?: readonly AllFilter[];
  readonly withDataOf?: readonly AllFilter[];
}

export interface SubscribeToAllOptions {
  /** Exclusive. */
  readonly after?: Position | typeof START;
  readonly filter?: AllFilter;
  /** Largest batch handed over at once. */
  readonly maxBatchSize?: number;
}

/**
 * One hand-over of a subscription: the events that matched since the last batch,
 * and the position up to which the log has been looked at (a checkpoint, which may
 * lie past the last event when a filter skipped events). `caughtUp` tells that the
 * subscription has reached the end of the log as it was when it looked.
 */
export interface SubscriptionBatch {
  readonly events: readonly RecordedEvent[];
  readonly checkpoint: Position;
  readonly caughtUp: boolean;
}

export interface AllSubscription extends AsyncIterable<SubscriptionBatch> {
  /** Ends the subscription; the iterator then finishes. */
  unsubscribe(): Promise<void>;
}

export interface AppendOptions {
  readonly expectedRevision?: ExpectedRevision;
  /**
   * An append dated by its decision (an entry a report of a past instant must hold): refused with
   * AppendTooLateError, nothing written, unless it is in the log by this instant of this host's clock
   * (Date.now): on PostgreSQL its transaction has begun by then (checked by the statement, after it
   * wrote, on the server's clock), elsewhere the append is sent by then. Never grouped with others.
   */
  readonly notAfter?: Date;
}

export interface EventStore {
  appendToStream(streamName: string, events: readonly EventToAppend[], options?: AppendOptions): Promise<AppendResult>;

  /** The stream's events; StreamNotFoundError when it has none. */
  readStream(streamName: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;

  /** Events of the global log after a position, in log order. */
  readAll(options?: ReadAllOptions): Promise<RecordedEvent[]>;

  /**
   * Optional (the PostgreSQL adapter has it): the events of the global log after
   * `after` up to `upTo` (a head from headPosition, inclusive), in log order, in one
   * read of one snapshot: the same events as readAll's pages up to `upTo`, each handed
   * to `onEvent` as it arrives (a promise it answers holds the read back). Returns how
   * many were read.
   */
  readAllThrough?(
    range: { readonly after: Position | typeof START; readonly upTo: Position },
    onEvent: (event: RecordedEvent) => void | Promise<void>,
    scope?: LogReadScope,
  ): Promise<number>;

  /**
   * Optional (the PostgreSQL adapter has it): whether the log is the `events` table of
   * the database this pool opens, read through this very pool. A rebuild may then
   * compute a read model from that table in SQL (Projection.rebuildInDatabase).
   */
  keepsLogIn?(pool: Pool): boolean;

  subscribeToAll(options?: SubscribeToAllOptions): AllSubscription;

  /** The position of the last event of the log, or null for an empty log. */
  headPosition(): Promise<Position | null>;

  close(): Promise<void>;
}

export class WrongExpectedRevisionError extends Error {
  constructor(
    readonly streamName: string,
    readonly expected: ExpectedRevision,
    readonly actual: bigint | 'no_stream',
  ) {
    super(`stream ${streamName}: expected revision ${String(expected)}, actual ${String(actual)}`);
    this.name = 'WrongExpectedRevisionError';
  }
}

export class StreamNotFoundError extends Error {
  constructor(readonly streamName: string) {
    super(`stream ${streamName} not found`);
    this.name = 'StreamNotFoundError';
  }
}

/** Some of the event ids of an append are already stored, but not as this append. */
export class DuplicateEventIdError extends Error {
  constructor(
    readonly streamName: string,
    readonly eventIds: readonly string[],
  ) {
    super(`stream ${streamName}: event ids already used elsewhere: ${eventIds.join(', ')}`);
    this.name = 'DuplicateEventIdError';
  }
}

/**
 * The store did not answer: down, unreachable, or past the deadline of a call. For
 * an append the outcome is unknown (it may have committed); every append carries
 * its event ids, so a retry with the same ids is recognised, never written twice.
 * The API answers it with 503 and Retry-After.
 */
export class EventStoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EventStoreUnavailableError';
  }
}

/**
 * An append was sent and its answer lost (the connection broke, the server stopped
 * answering), and whether it committed could not be checked either: its events may be
 * in the log or not. Only an append made again with the same event ids settles it.
 */
export class AppendOutcomeUnknownError extends EventStoreUnavailableError {
  constructor(
    readonly streamName: string,
    options: { cause: unknown },
  ) {
    super(`stream ${streamName}: the append was sent and its answer lost; whether it was written could not be checked`, options);
    this.name = 'AppendOutcomeUnknownError';
  }
}

/** The data or metadata of an event has no JSON form (a BigInt, a cycle): nothing was sent, nothing written. */
export class UnserializableEventError extends Error {
  constructor(
    readonly streamName: string,
    readonly eventId: string,
    readonly part: 'data' | 'metadata',
    options?: { cause?: unknown },
  ) {
    super(`stream ${streamName}: the ${part} of event ${eventId} cannot be written as JSON`, options);
    this.name = 'UnserializableEventError';
  }
}

/** An append with `notAfter` not in the log by then (AppendOptions): nothing written; decide again with a fresh date. */
export class AppendTooLateError extends Error {
  constructor(
    readonly streamName: string,
    readonly notAfter: Date,
  ) {
    super(`stream ${streamName}: the append was not in the log by ${notAfter.toISOString()}; nothing written`);
    this.name = 'AppendTooLateError';
  }
}

/** Refuses, before anything is sent, an append whose `notAfter` has passed on this host's clock (every store's first check). */
export function refuseLateAppend(streamName: string, notAfter: Date | undefined): void {
  if (notAfter && Date.now() > notAfter.getTime()) throw new AppendTooLateError(streamName, notAfter);
}

/** The store refused an append larger than it accepts at once (EventStoreDB's maximum append size): nothing written. */
export class AppendTooLargeError extends Error {
  constructor(
    readonly streamName: string,
    readonly maxAppendSizeBytes: number | null,
  ) {
    super(`stream ${streamName}: the append exceeds the store's maximum append size${maxAppendSizeBytes === null ? '' : ` of ${maxAppendSizeBytes} bytes`}`);
    this.name = 'AppendTooLargeError';
  }
}

/**
 * The JSON text of an event's data or metadata, made before anything is sent, so an
 * event that has none is refused as the append's own error (UnserializableEventError)
 * instead of failing inside a database driver or gRPC client.
 */
export function eventJson(streamName: string, event: EventToAppend, part: 'data' | 'metadata'): string {
  const value = part === 'data' ? event.data : (event.metadata ?? {});
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new UnserializableEventError(streamName, event.id, part, { cause: error });
  }
  // undefined: a function or a symbol where an object belongs
  if (typeof text !== 'string' || !text.startsWith('{')) throw new UnserializableEventError(streamName, event.id, part);
  return text;
}

export const EVENT_STORE = Symbol('EventStore');

export function comparePositions(a: Position, b: Position): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  if (a.prepare !== b.prepare) return a.prepare < b.prepare ? -1 : 1;
  return 0;
}

export const positionToString = (p: Position): string => `${p.commit}/${p.prepare}`;

export function positionFromString(s: string): Position {
  const match = /^(\d+)\/(\d+)$/.exec(s);
  if (!match) throw new RangeError(`not a log position: ${s}`);
  return { commit: BigInt(match[1]!), prepare: BigInt(match[2]!) };
}

export function matchesFilter(filter: AllFilter | undefined, event: { streamName: string; type: string }): boolean {
  if (!filter) return true;
  if (filter.streamNamePrefixes && !filter.streamNamePrefixes.some((p) => event.streamName.startsWith(p))) return false;
  if (filter.eventTypePrefixes && !filter.eventTypePrefixes.some((p) => event.type.startsWith(p))) return false;
  return true;
}

/** Whether the event matches one of the filters (any event when `filters` is absent). */
export function matchesAnyFilter(filters: readonly AllFilter[] | undefined, event: { streamName: string; type: string }): boolean {
  return filters === undefined || filters.some((f) => matchesFilter(f, event));
}

const STREAM_NAME = /^([a-z][a-z0-9_]*)-(.+)$/;

/** `<category>-<id>`: the category is lower-case letters, digits and underscores. */
export function streamName(category: string, id: string): string {
  const name = `${category}-${id}`;
  if (!STREAM_NAME.test(name)) throw new RangeError(`not a valid stream name: ${name}`);
  return name;
}

export function streamCategory(name: string): string {
  const match = STREAM_NAME.exec(name);
  return match ? match[1]! : name;
}
