/**
 * An immutable map from strings: `set` answers a new map that shares all but one path
 * of a hash trie with the old one (at most 7 nodes of 32 slots are copied, whatever
 * the size), so a fold that sets one key per event stays linear. Nothing built is ever
 * changed afterwards: a map may be shared, frozen and cloned freely.
 */
const BITS = 5;
const MASK = (1 << BITS) - 1;

/** Keys whose 32-bit hashes are equal, in the order they were first set. */
interface Leaf<V> {
  readonly hash: number;
  readonly entries: readonly (readonly [string, V])[];
}
/** 32 slots, by the next 5 bits of the hash. */
type Branch<V> = readonly (Trie<V> | undefined)[];
type Trie<V> = Leaf<V> | Branch<V>;

const isBranch = <V>(node: Trie<V>): node is Branch<V> => Array.isArray(node);

/** FNV-1a over the UTF-16 code units. */
function hashOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function withSlot<V>(branch: Branch<V>, index: number, node: Trie<V>): Branch<V> {
  const copy = branch.slice();
  copy[index] = node;
  return copy;
}

/** The trie with key set to value, and whether the key is new. */
function put<V>(node: Trie<V> | undefined, hash: number, key: string, value: V, shift: number): [Trie<V>, boolean] {
  if (node === undefined) return [{ hash, entries: [[key, value]] }, true];
  if (isBranch(node)) {
    const index = (hash >>> shift) & MASK;
    const [child, added] = put(node[index], hash, key, value, shift + BITS);
    return [withSlot(node, index, child), added];
  }
  if (node.hash === hash) {
    const at = node.entries.findIndex(([k]) => k === key);
    if (at < 0) return [{ hash, entries: [...node.entries, [key, value]] }, true];
    const entries = node.entries.slice();
    entries[at] = [key, value];
    return [{ hash, entries }, false];
  }
  // Two hashes differ in some bit, so they part before the shift passes 31.
  const branch: Branch<V> = withSlot(new Array<Trie<V> | undefined>(1 << BITS).fill(undefined), (node.hash >>> shift) & MASK, node);
  return put(branch, hash, key, value, shift);
}

export class PersistentMap<V> {
  private constructor(
    private readonly root: Trie<V> | undefined,
    /** How many keys it holds. */
    readonly size: number,
  ) {}

  static empty<V>(): PersistentMap<V> {
    return new PersistentMap<V>(undefined, 0);
  }

  get(key: string): V | undefined {
    const hash = hashOf(key);
    let node = this.root;
    for (let shift = 0; node !== undefined; shift += BITS) {
      if (!isBranch(node)) return node.hash === hash ? node.entries.find(([k]) => k === key)?.[1] : undefined;
      node = node[(hash >>> shift) & MASK];
    }
    return undefined;
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  /** A map with key set to value; this one is left as it was. */
  set(key: string, value: V): PersistentMap<V> {
    const [root, added] = put(this.root, hashOf(key), key, value, 0);
    return new PersistentMap(root, added ? this.size + 1 : this.size);
  }

  /** Every entry, as a plain object (in no particular order). */
  toRecord(): Record<string, V> {
    const record: Record<string, V> = {};
    const visit = (node: Trie<V> | undefined): void => {
      if (node === undefined) return;
      if (isBranch(node)) node.forEach(visit);
      // Defined, not assigned: a key `__proto__` would set the record's prototype instead of an entry.
      else for (const [k, v] of node.entries) Object.defineProperty(record, k, { value: v, enumerable: true, writable: true, configurable: true });
    };
    visit(this.root);
    return record;
  }
}
