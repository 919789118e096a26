import {
  ANY,
  ErrorType,
  eventTypeFilter,
  excludeSystemEvents,
  jsonEvent,
  NO_STREAM,
  START as ESDB_START,
  STREAM_EXISTS,
  streamNameFilter,
} from '@eventstore/db-client';
import type { AppendExpectedRevision, EventData, Filter, Position as ClientPosition, ReadPosition } from '@eventstore/db-client';
import {
  AllFilter,
  AppendTooLargeError,
  eventJson,
  EventStoreUnavailableError,
  EventToAppend,
  ExpectedRevision,
  JsonObject,
  Position,
  RecordedEvent,
  WrongExpectedRevisionError,
} from '../event-store';
import { canonicalJson, chainHashes, StoredChainedEvent } from '../hash-chain';

// Mapping between the port and @eventstore/db-client: pure functions, exported for
// the unit tests (they are not part of the port).

/** The fields of the client's RecordedEvent that the adapter uses (the client's type is assignable to it). */
export interface ClientRecordedEvent {
  readonly id: string;
  readonly type: string;
  readonly streamId: string;
  readonly revision: bigint;
  /** Parsed JSON for JSON events, a Uint8Array for binary ones. */
  readonly data: unknown;
  /** Parsed JSON, a Uint8Array when not JSON, undefined when empty. */
  readonly metadata?: unknown;
  readonly created: Date;
  /** See toPosition: the client fills in 0/0 when the server sent none. */
  readonly position?: ClientPosition;
}

/** What a read of the client yields (its ResolvedEvent and AllStreamResolvedEvent are assignable to it). */
export interface ClientResolvedEvent {
  readonly event?: ClientRecordedEvent;
}

/** One page of `$all` from a position, at most maxCount records, system events included. */
export type ReadPage = (from: ReadPosition, maxCount: number) => AsyncIterable<ClientResolvedEvent>;

/** uint64 -1: EventStoreDB's "no position" (Position.End) where a position field is present. */
const NO_POSITION = 2n ** 64n - 1n;

/**
 * The port's position of a position the client reports, or null when there is none.
 * The client builds an event's position from two protobuf uint64 fields, whose
 * default is 0: a server that sends no position (stream reads before 22.6) gives
 * 0/0, never undefined. No event sits at 0/0 (the log starts with the server's own
 * records), so 0/0 means "none", as does the uint64 form of -1.
 */
export function toPosition(position: ClientPosition | undefined): Position | null {
  if (!position) return null;
  if (position.commit === 0n && position.prepare === 0n) return null;
  if (position.commit < 0n || position.prepare < 0n || position.commit >= NO_POSITION || position.prepare >= NO_POSITION) {
    return null;
  }
  return { commit: position.commit, prepare: position.prepare };
}

export function toAppendExpectedRevision(expected: ExpectedRevision): AppendExpectedRevision {
  switch (expected) {
    case 'any':
      return ANY;
    case 'no_stream':
      return NO_STREAM;
    case 'stream_exists':
      return STREAM_EXISTS;
    default:
      // The server's revision is a uint64: a negative one would fail to serialize.
      if (expected < 0n) throw new RangeError(`not a stream revision: ${expected}`);
      return expected;
  }
}

/**
 * The events as the client sends them, serialised here first: an event whose data or
 * metadata has no JSON form is refused (UnserializableEventError) before the client
 * sees it. (6.2.1 stringifies inside a detached promise: the error would be an
 * unhandled rejection that ends the process, and the append would never settle.)
 * The client then stringifies them again: its JSON content type takes objects only.
 */
export function toProposedEvents(streamName: string, events: readonly EventToAppend[]): EventData[] {
  return events.map((e) => {
    eventJson(streamName, e, 'data');
    eventJson(streamName, e, 'metadata');
    return jsonEvent({ id: e.id, type: e.type, data: e.data, ...(e.metadata === undefined ? {} : { metadata: e.metadata }) });
  });
}

/**
 * The port's error for an error of the client. Anything not listed is left as it is.
 * - WrongExpectedVersionError → WrongExpectedRevisionError, with the actual revision;
 * - MaxAppendSizeExceededError → AppendTooLargeError;
 * - the server cannot be reached or did not answer in time (unavailable, deadline,
 *   cancelled, the server's own commit timeout, not the leader, discovery failed) →
 *   EventStoreUnavailableError.
 */
export function toPortAppendError(streamName: string, expected: ExpectedRevision, error: unknown): unknown {
  if (isClientError(error, ErrorType.WRONG_EXPECTED_VERSION)) {
    const actual = (error as { actualVersion?: unknown }).actualVersion;
    return new WrongExpectedRevisionError(streamName, expected, typeof actual === 'bigint' ? actual : 'no_stream');
  }
  if (isClientError(error, ErrorType.MAXIMUM_APPEND_SIZE_EXCEEDED)) {
    const max = (error as { maxAppendSize?: unknown }).maxAppendSize;
    return new AppendTooLargeError(streamName, typeof max === 'number' && Number.isFinite(max) ? max : null);
  }
  return toUnavailable(error, `appending to ${streamName}`);
}

/** The client's errors that mean "no answer from the server": the call may be retried later. */
const UNAVAILABLE_TYPES: readonly ErrorType[] = [
  ErrorType.UNAVAILABLE,
  ErrorType.DEADLINE_EXCEEDED,
  ErrorType.CANCELLED,
  ErrorType.TIMEOUT,
  ErrorType.NOT_LEADER,
];
/** gRPC status codes of the same (errors the client passes on unconverted): CANCELLED, DEADLINE_EXCEEDED, ABORTED, UNAVAILABLE. */
const UNAVAILABLE_GRPC_CODES: readonly number[] = [1, 4, 10, 14];

export function isUnavailable(error: unknown): boolean {
  if (error instanceof EventStoreUnavailableError) return true;
  if (!(error instanceof Error)) return false;
  const type = (error as { type?: unknown }).type;
  if (typeof type === 'string') return (UNAVAILABLE_TYPES as readonly string[]).includes(type);
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'number' && 'details' in error) return UNAVAILABLE_GRPC_CODES.includes(code);
  return /^Failed to discover after \d+ attempts/.test(error.message);
}

/** EventStoreUnavailableError for an error that means the server did not answer; anything else as it is. */
export function toUnavailable(error: unknown, what: string): unknown {
  if (error instanceof EventStoreUnavailableError || !isUnavailable(error)) return error;
  return new EventStoreUnavailableError(`EventStoreDB did not answer while ${what}: ${(error as Error).message}`, { cause: error });
}

/** Whether `error` is the client's error of this type (by its `type`, which survives two copies of the client package). */
export function isClientError(error: unknown, type: ErrorType): boolean {
  return error instanceof Error && (error as { type?: unknown }).type === type;
}

export function expectationHolds(expected: ExpectedRevision, actual: bigint | 'no_stream'): boolean {
  return (
    expected === 'any' ||
    (expected === 'no_stream' && actual === 'no_stream') ||
    (expected === 'stream_exists' && actual !== 'no_stream') ||
    (typeof expected === 'bigint' && actual === expected)
  );
}

/**
 * The revision of the first event an append expects to write, for the expectations
 * that name one (`no_stream`: 0, an exact revision: the next one); null for `any` and
 * `stream_exists`, which name no position.
 */
export function expectedFirstRevision(expected: ExpectedRevision): bigint | null {
  if (expected === 'no_stream') return 0n;
  if (typeof expected === 'bigint') return expected + 1n;
  return null;
}

/**
 * How the events stored where an append expected to write compare with the append:
 * `same` when they are exactly its events in its order (the append, or a retry of it,
 * is in the stream), `overlap` with the append's ids found among them (some of its ids
 * are stored there, but not as this append), `none` when none of its ids is there.
 */
export function compareWithStored(
  stored: readonly { readonly id: string }[],
  ids: readonly string[],
): { readonly kind: 'same' } | { readonly kind: 'overlap'; readonly ids: readonly string[] } | { readonly kind: 'none' } {
  const key = (id: string) => id.toLowerCase();
  if (stored.length === ids.length && stored.every((e, i) => key(e.id) === key(ids[i]!))) return { kind: 'same' };
  const storedIds = new Set(stored.map((e) => key(e.id)));
  const overlap = ids.filter((id) => storedIds.has(key(id)));
  return overlap.length > 0 ? { kind: 'overlap', ids: overlap } : { kind: 'none' };
}

/**
 * The client's read position for the port's exclusive `after`. (0, 0) is the
 * PostgreSQL adapter's "nothing read yet" (and a checkpoint store's initial value),
 * and it is before every event of EventStoreDB's log too: ask for the start.
 */
export function toReadPosition(after: Position | 'start'): ReadPosition {
  if (after === 'start' || (after.commit === 0n && after.prepare === 0n)) return ESDB_START;
  return { commit: after.commit, prepare: after.prepare };
}

/** EventStoreDB's own events: system streams (`$…`, metadata streams `$$…`) and system types (`$…`, links `$>`). */
export function isSystemEvent(event: { readonly streamId: string; readonly type: string }): boolean {
  return event.streamId.startsWith('$') || event.type.startsWith('$');
}

export function toRecordedEvent(event: ClientRecordedEvent): RecordedEvent {
  const position = toPosition(event.position);
  if (!position) {
    throw new Error(`EventStoreDB did not send the position of event ${event.id} (server older than 22.6?)`);
  }
  return {
    id: event.id,
    type: event.type,
    streamName: event.streamId,
    revision: event.revision,
    data: toJsonObject(event.data),
    metadata: withoutChainHash(toJsonObject(event.metadata)),
    position,
    createdAt: event.created,
  };
}

/**
 * The port's data and metadata are JSON objects. Events written by this adapter
 * always are; events written by other tools may not be:
 * - missing / empty → `{}`;
 * - JSON that is not an object (array, string, number; or text the client could not
 *   parse, which it hands over as a string) → `{ value: <it> }`;
 * - binary content: parsed if it is a JSON object (written without the JSON content
 *   type), else `{ binary: '<base64>' }`.
 */
export function toJsonObject(value: unknown): JsonObject {
  if (value === undefined || value === null) return {};
  if (value instanceof Uint8Array) {
    if (value.length === 0) return {};
    const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    try {
      const parsed: unknown = JSON.parse(bytes.toString('utf8'));
      if (isJsonObject(parsed)) return parsed;
    } catch {
      // not JSON
    }
    return { binary: bytes.toString('base64') };
  }
  if (isJsonObject(value)) return value;
  return { value };
}

function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

/**
 * The server-side filter of a subscription. EventStoreDB filters on one thing only,
 * stream name or event type (by prefixes or a regex): with both kinds of prefixes
 * in the port's filter, the stream names go to the server and the types are checked
 * here (the batches apply the whole port filter again). Without prefixes, the server
 * leaves out system events. A filtered subscription is also what makes the server
 * send checkpoints, which let a consumer move past events the filter skipped.
 */
export function serverFilter(
  filter: AllFilter | undefined,
  checkpoints: { checkpointInterval: number; checkpointReached: NonNullable<Filter['checkpointReached']> },
): Filter {
  if (filter?.streamNamePrefixes && filter.streamNamePrefixes.length > 0) {
    return streamNameFilter({ prefixes: [...filter.streamNamePrefixes], ...checkpoints });
  }
  if (filter?.eventTypePrefixes && filter.eventTypePrefixes.length > 0) {
    return eventTypeFilter({ prefixes: [...filter.eventTypePrefixes], ...checkpoints });
  }
  // (Empty prefix lists match nothing: the server then sends all user events and the
  // batches drop them, keeping only the checkpoints.)
  return excludeSystemEvents(checkpoints);
}

/**
 * The metadata key that carries an event's chain hash on EventStoreDB (docs/audit-log.md):
 * 64 hex digits, set by the adapter on append and left out of the metadata it reads
 * (the port's metadata is the same on both stores). Reserved: a caller's value under it
 * is replaced.
 */
export const CHAIN_HASH_METADATA_KEY = 'eventChainHash';

/** Where a stream's chain goes on: the chain hash of its last event (null: none) and the revision of the next. */
export interface ChainHead {
  readonly previous: Buffer | null;
  readonly firstRevision: bigint;
}

/** The events with their chain hashes in their metadata, chained after `head` (the same hashes the PostgreSQL store writes). */
export function withChainHashes(streamName: string, head: ChainHead, events: readonly EventToAppend[]): EventToAppend[] {
  const hashes = chainHashes(
    head.previous,
    events.map((e, i) => ({
      streamName,
      revision: head.firstRevision + BigInt(i),
      id: e.id,
      type: e.type,
      dataJson: canonicalJson(e.data),
      metadataJson: canonicalJson(withoutChainHash(e.metadata ?? {})),
    })),
  );
  return events.map((e, i) => ({ ...e, metadata: { ...withoutChainHash(e.metadata ?? {}), [CHAIN_HASH_METADATA_KEY]: hashes[i]!.toString('hex') } }));
}

/** The chain hash an event's metadata carries, or null. */
export function chainHashOfMetadata(metadata: unknown): Buffer | null {
  const value = metadata !== null && typeof metadata === 'object' ? (metadata as Record<string, unknown>)[CHAIN_HASH_METADATA_KEY] : undefined;
  return typeof value === 'string' && /^[0-9a-f]{64}$/.test(value) ? Buffer.from(value, 'hex') : null;
}

export function withoutChainHash(metadata: JsonObject): JsonObject {
  if (!(CHAIN_HASH_METADATA_KEY in metadata)) return metadata;
  const rest: Record<string, unknown> = { ...metadata };
  delete rest[CHAIN_HASH_METADATA_KEY];
  return rest;
}

/** An event read from EventStoreDB as the stream chain check takes it (StreamChainCheck). */
export function storedChainedEventOf(event: ClientRecordedEvent): StoredChainedEvent {
  const recorded = toRecordedEvent(event);
  return {
    streamName: recorded.streamName,
    revision: recorded.revision,
    id: recorded.id,
    type: recorded.type,
    dataJson: canonicalJson(recorded.data),
    metadataJson: canonicalJson(recorded.metadata),
    position: `${recorded.position.commit}/${recorded.position.prepare}`,
    storedHash: chainHashOfMetadata(event.metadata),
  };
}
