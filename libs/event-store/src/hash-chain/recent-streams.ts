import { CHAIN_HASH_BYTES } from './hash-chain';

/**
 * The last event of the streams met recently in a read of the log (its revision and
 * stored chain hash), at most 2 × `generation` of them: what lets the read check most
 * events against their stream's previous revision without asking the database for it
 * (decision 0123), in memory that does not grow with the log.
 *
 * Two generations of names approximate "least recently used": a stream found or
 * remembered goes into the current generation; when that holds `generation` streams it
 * becomes the previous one, and the streams of the generation before are forgotten (a
 * stream not met for that long is looked up again when it returns). Revisions and
 * hashes are kept in typed arrays by slot, not as an object or a Buffer per stream.
 */
export class RecentStreams {
  private current = new Map<string, number>();
  private previous = new Map<string, number>();
  private readonly free: number[] = [];
  /** Per slot: the revision of the stream's last event. */
  readonly revisions: Float64Array;
  /** Per slot: that event's stored chain hash, 32 bytes at slot × 32 (see `hashed`). */
  readonly hashes: Buffer;
  /** Per slot: 1 when that event has a stored chain hash of 32 bytes. */
  readonly hashed: Uint8Array;

  constructor(private readonly generation: number) {
    if (!Number.isInteger(generation) || generation < 1) throw new Error(`a generation of recent streams holds at least one stream, not ${generation}`);
    const slots = 2 * generation;
    this.revisions = new Float64Array(slots);
    this.hashes = Buffer.alloc(slots * CHAIN_HASH_BYTES);
    this.hashed = new Uint8Array(slots);
    for (let slot = slots - 1; slot >= 0; slot--) this.free.push(slot);
  }

  /** Streams remembered now. */
  get size(): number {
    return this.current.size + this.previous.size;
  }

  /** The slot of the stream's last event when it was met recently, else -1. */
  find(streamName: string): number {
    const slot = this.current.get(streamName);
    if (slot !== undefined) return slot;
    const older = this.previous.get(streamName);
    if (older === undefined) return -1;
    this.previous.delete(streamName);
    this.enter(streamName, older);
    return older;
  }

  /**
   * The stream's last event is now at `revision`, with the 32 bytes of `hash` at
   * `offset` as its stored chain hash (null: none). `found`: what `find` answered for
   * the stream just before, when the caller asked (no second lookup).
   */
  remember(streamName: string, revision: number, hash: Uint8Array | null, offset: number, found = this.find(streamName)): void {
    let slot = found;
    if (slot < 0) {
      slot = this.free.pop()!;
      this.enter(streamName, slot);
    }
    this.revisions[slot] = revision;
    if (hash === null) {
      this.hashed[slot] = 0;
      return;
    }
    const at = slot * CHAIN_HASH_BYTES;
    for (let k = 0; k < CHAIN_HASH_BYTES; k++) this.hashes[at + k] = hash[offset + k]!;
    this.hashed[slot] = 1;
  }

  private enter(streamName: string, slot: number): void {
    this.current.set(streamName, slot);
    if (this.current.size < this.generation) return;
    // The current generation is full: the one before is forgotten, its slots free again.
    for (const forgotten of this.previous.values()) this.free.push(forgotten);
    this.previous = this.current;
    this.current = new Map();
  }
}
