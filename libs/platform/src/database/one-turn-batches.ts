/**
 * Collects what arrives in one turn of the event loop and hands it over together after
 * the turn's I/O callbacks (setImmediate: every request whose bytes were read in the
 * same poll phase has reached this point by then), so that the statements of one turn
 * can be one (Bearer key lookups, appends). An item waits at most one turn; alone in
 * its turn, it is a batch of one.
 */
export class OneTurnBatches<Item> {
  private pending: Item[] | null = null;

  constructor(private readonly flush: (items: Item[]) => void) {}

  add(item: Item): void {
    if (this.pending === null) {
      this.pending = [];
      setImmediate(() => {
        const items = this.pending!;
        this.pending = null;
        this.flush(items);
      });
    }
    this.pending.push(item);
  }
}
