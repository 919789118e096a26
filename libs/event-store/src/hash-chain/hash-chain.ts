import { createHash, hash } from 'node:crypto';

/**
 * The tamper-evident event log: pure definitions, no I/O (docs/audit-log.md).
 *
 * - An event's *content* is six netstrings (`<UTF-8 byte length>:<bytes>,`): stream
 *   name, revision (decimal), event id (lower-case UUID), type, data and metadata, the
 *   last two as canonical JSON (PostgreSQL's jsonb text form, see canonicalJson).
 * - Its *chain hash* is SHA-256(previous chain hash of its stream ‖ content); the
 *   previous hash of a stream's first event is 32 zero bytes.
 * - The log's *running hash* after its n-th event (log order) is
 *   SHA-256(running hash after n-1 ‖ chain hash of event n), 32 zero bytes before the
 *   first: a checkpoint is (position of event n, n, running hash).
 *
 * PostgreSQL computes the chain hash in SQL when it inserts an event (event_chain_hashes,
 * migration event-store:0001) over `data::text`, which is canonicalJson's output for the
 * same value; EventStoreDB's adapter computes it here and carries it in the metadata.
 */

export const CHAIN_HASH_BYTES = 32;
/** The "previous hash" of a stream's first event, and the running hash of an empty log. */
export const GENESIS_HASH: Buffer = Buffer.alloc(CHAIN_HASH_BYTES);

/** What an event's chain hash covers. data and metadata are canonical JSON texts. */
export interface ChainedEventContent {
  readonly streamName: string;
  readonly revision: bigint;
  readonly id: string;
  readonly type: string;
  readonly dataJson: string;
  readonly metadataJson: string;
}

/** `<UTF-8 byte length>:<text>,` (the length counts bytes; the text stays a string until the whole content is encoded once). */
const netstring = (text: string): string => `${Buffer.byteLength(text, 'utf8')}:${text},`;

const contentText = (event: ChainedEventContent): string =>
  netstring(event.streamName) +
  netstring(event.revision.toString()) +
  netstring(event.id.toLowerCase()) +
  netstring(event.type) +
  netstring(event.dataJson) +
  netstring(event.metadataJson);

/** The bytes an event's chain hash is taken over (after the previous hash). */
export function chainContent(event: ChainedEventContent): Buffer {
  return Buffer.from(contentText(event), 'utf8');
}

export function sha256(...parts: readonly Buffer[]): Buffer {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
}

/** An event's chain hash: SHA-256(previous ‖ content); previous null for a stream's first event. */
export function nextChainHash(previous: Buffer | null, content: Buffer): Buffer {
  return sha256(previous ?? GENESIS_HASH, content);
}

/**
 * nextChainHash(previous, chainContent(event)) in one buffer and one call of SHA-256
 * (what a verification does a million times for a million events).
 */
export function eventChainHash(previous: Buffer | null, event: ChainedEventContent): Buffer {
  const prefix = previous ?? GENESIS_HASH;
  const text = contentText(event);
  const input = Buffer.allocUnsafe(prefix.length + Buffer.byteLength(text, 'utf8'));
  prefix.copy(input, 0);
  input.write(text, prefix.length, 'utf8');
  return hash('sha256', input, 'buffer') as unknown as Buffer;
}

/** Where an event's content texts are among a row's fields (indexes into `starts`/`ends`; see ContentBytesDigest). */
export interface ContentFields {
  readonly streamName: number;
  readonly id: number;
  readonly type: number;
  readonly data: number;
  readonly metadata: number;
}

/**
 * An event's chain hash (eventChainHash) as lower-case hex, for an event whose content
 * texts are UTF-8 bytes in a row (the fields of `bytes` from `starts[i]` to `ends[i]`,
 * at the places `fields` names), its revision a number, and its previous hash the 32
 * bytes of `previous` at `offset` (null: the stream's first event): the same digest
 * without decoding the texts to strings and encoding them again (what a read of the
 * log in COPY's binary form hands over; decision 0123). Node 20 gives a digest as a
 * string for about a third of what a digest as a Buffer costs (decision 0123). The id
 * is taken as it is (eventChainHash lower-cases it: a caller whose digest differs from
 * the stored hash falls back to the decoded event). The input is built in one buffer
 * reused from event to event.
 */
export class ContentBytesDigest {
  private input = Buffer.allocUnsafeSlow(4096);
  /** The fields of the texts. */
  private readonly texts: readonly number[];

  constructor(private readonly fields: ContentFields) {
    this.texts = [fields.streamName, fields.id, fields.type, fields.data, fields.metadata];
  }

  digest(previous: Uint8Array | null, offset: number, bytes: Buffer, starts: Int32Array, ends: Int32Array, revision: number): string {
    const { fields } = this;
    const name = fields.streamName;
    const data = fields.data;
    const metadata = fields.metadata;
    let texts = 0;
    for (const i of this.texts) texts += ends[i]! - starts[i]!;
    // Room: the previous hash, the texts, and six lengths (up to 11 digits) with their two marks, the revision's digits (up to 16).
    const room = CHAIN_HASH_BYTES + texts + 6 * 13 + 16;
    if (room > this.input.length) this.input = Buffer.allocUnsafeSlow(Math.max(room, 2 * this.input.length));
    const input = this.input;
    if (previous === null) input.fill(0, 0, CHAIN_HASH_BYTES);
    else for (let k = 0; k < CHAIN_HASH_BYTES; k++) input[k] = previous[offset + k]!;
    let p = this.netstring(bytes, starts[name]!, ends[name]!, CHAIN_HASH_BYTES);
    const digits = String(revision);
    p = writeDecimal(input, digits.length, p);
    input[p++] = 0x3a; // ':'
    p += input.write(digits, p, 'latin1');
    input[p++] = 0x2c; // ','
    p = this.netstring(bytes, starts[fields.id]!, ends[fields.id]!, p);
    p = this.netstring(bytes, starts[fields.type]!, ends[fields.type]!, p);
    p = this.netstring(bytes, starts[data]!, ends[data]!, p);
    p = this.netstring(bytes, starts[metadata]!, ends[metadata]!, p);
    return hash('sha256', input.subarray(0, p), 'hex');
  }

  /** `<length>:<bytes>,` of bytes[start, end) at p; answers where it ends. */
  private netstring(bytes: Buffer, start: number, end: number, p: number): number {
    const input = this.input;
    p = writeDecimal(input, end - start, p);
    input[p++] = 0x3a;
    if (end - start > 64) p += bytes.copy(input, p, start, end);
    else for (let k = start; k < end; k++) input[p++] = bytes[k]!;
    input[p++] = 0x2c;
    return p;
  }
}

/** A non-negative integer's decimal digits written at p; answers where they end. */
function writeDecimal(input: Buffer, value: number, p: number): number {
  if (value < 10) {
    input[p] = 0x30 + value;
    return p + 1;
  }
  let digits = 1;
  for (let v = value; v >= 10; v = Math.floor(v / 10)) digits += 1;
  let v = value;
  for (let k = digits - 1; k >= 0; k--) {
    input[p + k] = 0x30 + (v % 10);
    v = Math.floor(v / 10);
  }
  return p + digits;
}

/**
 * The log's running hash folded event by event (nextLogHash, the same values) in one
 * reused input buffer, each step's digest taken as hex: no Buffer per event.
 */
export class RunningLogHash {
  /** The running hash so far, then room for the next chain hash. */
  private readonly input = Buffer.alloc(2 * CHAIN_HASH_BYTES);
  private hex = GENESIS_HASH.toString('hex');

  /** One more event, its chain hash the 32 bytes of `chainHashes` at `offset` (null: an event without a chain hash, folded as 32 zero bytes). */
  add(chainHashes: Uint8Array | null, offset: number): void {
    const input = this.input;
    if (chainHashes === null) input.fill(0, CHAIN_HASH_BYTES);
    else for (let k = 0; k < CHAIN_HASH_BYTES; k++) input[CHAIN_HASH_BYTES + k] = chainHashes[offset + k]!;
    this.hex = hash('sha256', input, 'hex');
    input.write(this.hex, 0, 'hex');
  }

  get bytes(): Buffer {
    return Buffer.from(this.hex, 'hex');
  }
}

/** The chain hashes of events appended to a stream after `previous` (null: the stream's first events), in order. */
export function chainHashes(previous: Buffer | null, events: readonly ChainedEventContent[]): Buffer[] {
  const hashes: Buffer[] = [];
  let last = previous;
  for (const event of events) {
    last = eventChainHash(last, event);
    hashes.push(last);
  }
  return hashes;
}

/** The log's running hash after one more event: SHA-256(previous ‖ chain hash), in one buffer and one call. */
export function nextLogHash(previous: Buffer, eventChainHash: Buffer): Buffer {
  const input = Buffer.allocUnsafe(previous.length + eventChainHash.length);
  previous.copy(input, 0);
  eventChainHash.copy(input, previous.length);
  return hash('sha256', input, 'buffer') as unknown as Buffer;
}

/**
 * Canonical JSON: the text PostgreSQL gives for a jsonb value (`data::text`), so that a
 * hash over it is the same computed in SQL over the stored column or here over the
 * value. The value is taken as JSON.stringify sees it (toJSON, undefined properties
 * left out, non-finite numbers as null); then
 * - object keys ordered by UTF-8 byte length, then by their bytes (jsonb's order);
 * - `": "` between key and value, `", "` between members and array elements;
 * - strings escaped as JSON.stringify does (which is what PostgreSQL's escape_json does
 *   for any string it can store);
 * - numbers in plain decimal notation, never with an exponent (1e+21 →
 *   1000000000000000000000, 1e-7 → 0.0000001), as numeric prints them.
 */
export function canonicalJson(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError('the value has no JSON form');
  return canonical(JSON.parse(text) as unknown);
}

function canonical(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      return plainDecimal(JSON.stringify(value));
    case 'string':
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) return `[${value.map(canonical).join(', ')}]`;
      const entries = Object.entries(value as Record<string, unknown>).map(([k, v]) => ({ key: Buffer.from(k, 'utf8'), k, v }));
      entries.sort((a, b) => a.key.length - b.key.length || Buffer.compare(a.key, b.key));
      return `{${entries.map((e) => `${JSON.stringify(e.k)}: ${canonical(e.v)}`).join(', ')}}`;
    }
    default:
      throw new TypeError(`no JSON form for a ${typeof value}`);
  }
}

/** A JavaScript number's JSON text without exponent, as PostgreSQL's numeric prints it. */
export function plainDecimal(text: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?e([+-]\d+)$/i.exec(text);
  if (!match) return text;
  const [, sign, int, frac = '', exp] = match;
  const digits = `${int}${frac}`;
  const point = int!.length + Number(exp);
  let plain: string;
  if (point >= digits.length) plain = digits + '0'.repeat(point - digits.length);
  else if (point <= 0) plain = `0.${'0'.repeat(-point)}${digits}`;
  else plain = `${digits.slice(0, point)}.${digits.slice(point)}`;
  return `${sign}${plain}`;
}

/** A checkpoint of the log: the running hash after `events` events, the last at `position`. */
export interface LogCheckpoint {
  /** The position of the last event covered (`commit/prepare`), or `0/0` for an empty log. */
  readonly position: string;
  readonly events: bigint;
  readonly hash: Buffer;
}

/** The text a checkpoint's signature covers (one line each: version, position, events, hash in hex). */
export function checkpointSignedText(checkpoint: LogCheckpoint): string {
  return `gateway-log-checkpoint-v1\n${checkpoint.position}\n${checkpoint.events}\n${checkpoint.hash.toString('hex')}`;
}
