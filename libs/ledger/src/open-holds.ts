/**
 * The open holds of a ledger, immutable: opening or releasing one answers a new value
 * that shares all but one path of two treaps with the old one (by invoice id, and by
 * due time), so that each entry of the ledger costs O(log n) in the holds open, not a
 * copy of them all. Their total is kept as they move, and the holds due by an instant
 * are read in due order without sorting the others. As JSON it is the record of the
 * holds by invoice id (what a ledger snapshot stores).
 */

export interface OpenHold {
  readonly amount: number;
  readonly releaseAt: string | null;
}

/** A treap node: a search tree by key, a heap by priority (a hash of the invoice id). */
interface Node<K> {
  readonly key: K;
  readonly id: string;
  readonly hold: OpenHold;
  readonly priority: number;
  readonly left: Node<K> | undefined;
  readonly right: Node<K> | undefined;
}

/** When a hold is due: a hold without an end is due at once, one with an end that is not a time never. */
function dueOf(hold: OpenHold): number {
  if (hold.releaseAt === null) return 0;
  const at = Date.parse(hold.releaseAt);
  return Number.isNaN(at) ? Number.MAX_VALUE : at;
}

interface Due {
  readonly at: number;
  readonly id: string;
}

const byId = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
/** The earliest due first; invoice ids (unique) break ties, so the order never depends on the fold's. */
const byDue = (a: Due, b: Due): number => a.at - b.at || byId(a.id, b.id);

/** FNV-1a over the UTF-16 code units. */
function priorityOf(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * Whether `a` sits above `b` in the heap: by priority, ties by invoice id, so that the
 * shape of a treap depends only on the holds in it, never on the order they came in.
 */
const above = (a: { priority: number; id: string }, b: { priority: number; id: string }): boolean =>
  a.priority > b.priority || (a.priority === b.priority && a.id < b.id);

const node = <K>(from: Node<K>, left: Node<K> | undefined, right: Node<K> | undefined): Node<K> => ({ ...from, left, right });

/** The tree with `leaf` in place of the node of its key (or added). */
function put<K>(tree: Node<K> | undefined, leaf: Node<K>, cmp: (a: K, b: K) => number): Node<K> {
  if (tree === undefined) return leaf;
  const c = cmp(leaf.key, tree.key);
  if (c === 0) return node(leaf, tree.left, tree.right);
  if (c < 0) {
    const left = put(tree.left, leaf, cmp);
    return above(left, tree) ? node(left, left.left, node(tree, left.right, tree.right)) : node(tree, left, tree.right);
  }
  const right = put(tree.right, leaf, cmp);
  return above(right, tree) ? node(right, node(tree, tree.left, right.left), right.right) : node(tree, tree.left, right);
}

/** Two trees as one, every key of `a` before every key of `b`. */
function join<K>(a: Node<K> | undefined, b: Node<K> | undefined): Node<K> | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return above(a, b) ? node(a, a.left, join(a.right, b)) : node(b, join(a, b.left), b.right);
}

/** The tree without the node of `key` (the same tree when it has none). */
function remove<K>(tree: Node<K> | undefined, key: K, cmp: (a: K, b: K) => number): Node<K> | undefined {
  if (tree === undefined) return undefined;
  const c = cmp(key, tree.key);
  if (c === 0) return join(tree.left, tree.right);
  if (c < 0) {
    const left = remove(tree.left, key, cmp);
    return left === tree.left ? tree : node(tree, left, tree.right);
  }
  const right = remove(tree.right, key, cmp);
  return right === tree.right ? tree : node(tree, tree.left, right);
}

/** A treap of nodes given in key order, built in linear time (a Cartesian tree by priority). */
function fromSorted<K>(nodes: readonly Node<K>[]): Node<K> | undefined {
  // The right spine, built bottom-up: mutable while building, never changed once returned.
  type Building = { key: K; id: string; hold: OpenHold; priority: number; left: Node<K> | undefined; right: Node<K> | undefined };
  const spine: Building[] = [];
  for (const n of nodes) {
    const built: Building = { ...n, left: undefined, right: undefined };
    let last: Building | undefined;
    while (spine.length > 0 && above(built, spine[spine.length - 1]!)) last = spine.pop();
    built.left = last;
    if (spine.length > 0) spine[spine.length - 1]!.right = built;
    spine.push(built);
  }
  return spine[0];
}

export class OpenHolds {
  private constructor(
    private readonly ids: Node<string> | undefined,
    private readonly due: Node<Due> | undefined,
    /** How many holds are open. */
    readonly size: number,
    /** The sum of their amounts (what `pending` must equal). */
    readonly total: number,
  ) {}

  private static readonly EMPTY = new OpenHolds(undefined, undefined, 0, 0);

  static empty(): OpenHolds {
    return OpenHolds.EMPTY;
  }

  /** The holds of a record by invoice id (a stored snapshot's), in O(n log n). */
  static fromRecord(record: Readonly<Record<string, OpenHold>>): OpenHolds {
    const holds = Object.keys(record).map((id) => ({ id, hold: { amount: record[id]!.amount, releaseAt: record[id]!.releaseAt } }));
    const nodeOf = <K>(key: K, h: { id: string; hold: OpenHold }): Node<K> => ({
      key,
      id: h.id,
      hold: h.hold,
      priority: priorityOf(h.id),
      left: undefined,
      right: undefined,
    });
    const ids = fromSorted(holds.map((h) => nodeOf(h.id, h)).sort((a, b) => byId(a.key, b.key)));
    const due = fromSorted(holds.map((h) => nodeOf({ at: dueOf(h.hold), id: h.id }, h)).sort((a, b) => byDue(a.key, b.key)));
    return new OpenHolds(
      ids,
      due,
      holds.length,
      holds.reduce((s, h) => s + h.hold.amount, 0),
    );
  }

  get(invoiceId: string): OpenHold | undefined {
    let n = this.ids;
    while (n !== undefined) {
      const c = byId(invoiceId, n.key);
      if (c === 0) return n.hold;
      n = c < 0 ? n.left : n.right;
    }
    return undefined;
  }

  has(invoiceId: string): boolean {
    return this.get(invoiceId) !== undefined;
  }

  /** The holds with `invoiceId`'s open (or replaced) as `hold`. */
  with(invoiceId: string, hold: OpenHold): OpenHolds {
    const old = this.get(invoiceId);
    const held: OpenHold = { amount: hold.amount, releaseAt: hold.releaseAt };
    const priority = priorityOf(invoiceId);
    const leaf = <K>(key: K): Node<K> => ({ key, id: invoiceId, hold: held, priority, left: undefined, right: undefined });
    const due = old === undefined ? this.due : remove(this.due, { at: dueOf(old), id: invoiceId }, byDue);
    return new OpenHolds(
      put(this.ids, leaf(invoiceId), byId),
      put(due, leaf({ at: dueOf(held), id: invoiceId }), byDue),
      old === undefined ? this.size + 1 : this.size,
      this.total - (old?.amount ?? 0) + held.amount,
    );
  }

  /** The holds without `invoiceId`'s (the same value when it is not open). */
  without(invoiceId: string): OpenHolds {
    const old = this.get(invoiceId);
    if (old === undefined) return this;
    return new OpenHolds(remove(this.ids, invoiceId, byId), remove(this.due, { at: dueOf(old), id: invoiceId }, byDue), this.size - 1, this.total - old.amount);
  }

  /** The holds due by `at` (epoch ms), the earliest due first (ties by invoice id), read lazily. */
  *dueBy(at: number): Generator<readonly [string, OpenHold]> {
    if (Number.isNaN(at)) return;
    const stack: Node<Due>[] = [];
    let n = this.due;
    for (;;) {
      while (n !== undefined) {
        stack.push(n);
        n = n.left;
      }
      const next = stack.pop();
      if (next === undefined || next.key.at > at) return;
      yield [next.id, next.hold];
      n = next.right;
    }
  }

  /** Every open hold by invoice id, as a plain record. */
  toRecord(): Record<string, OpenHold> {
    const record: Record<string, OpenHold> = {};
    const visit = (n: Node<string> | undefined): void => {
      if (n === undefined) return;
      visit(n.left);
      // An id such as `__proto__` is just an id: an own property.
      Object.defineProperty(record, n.id, { value: n.hold, enumerable: true, writable: true, configurable: true });
      visit(n.right);
    };
    visit(this.ids);
    return record;
  }

  /** As JSON: the record by invoice id, as the state's holds were always stored. */
  toJSON(): Record<string, OpenHold> {
    return this.toRecord();
  }
}
