/**
 * What one API process remembers of credentials (secret-key hashes, public ids), so
 * that a failing attempt can be told apart without the database. Two facts only,
 * and neither can go stale:
 * - **dead**: a credential the database did not find live. Revocation is permanent
 *   and a key is never issued twice, so it never becomes live again.
 * - **seen**: a credential the database once found live, with what it found for it
 *   (a public id's project webhook secret). It is not proof of being live now: every
 *   request whose credential holds is still looked up, so a revocation stops the next
 *   request in every process. What was found can change (a webhook secret replaced
 *   after a leak): `forgetLive` drops it all when it did, `forget` one credential.
 * A credential neither dead nor seen is probed once: concurrent first sightings of
 * one credential share one lookup. So a failing credential costs at most one lookup
 * per process, ever, however often and however concurrently it is tried.
 */
export class CredentialMemory<Seen> {
  private readonly dead = new Map<string, true>();
  private readonly seen = new Map<string, Seen>();
  private readonly probes = new Map<string, Promise<unknown>>();
  /** Moves at every `forgetLive`: a probe that read the database before it remembers nothing. */
  private epoch = 0;
  /** Moves at every `forget`: a probe running then may have read what was forgotten, and remembers nothing. */
  private forgets = 0;

  /** `max`: entries kept of each fact (the oldest are forgotten first, and then only cost a lookup again). */
  constructor(private readonly max = 100_000) {}

  isDead(credential: string): boolean {
    return this.dead.has(credential);
  }

  seenLive(credential: string): Seen | undefined {
    return this.seen.get(credential);
  }

  markDead(credential: string): void {
    this.seen.delete(credential);
    remember(this.dead, credential, true, this.max);
  }

  markLive(credential: string, what: Seen): void {
    remember(this.seen, credential, what, this.max);
  }

  /** What was seen of one credential is out of date: its next sighting is probed again (not joined to a probe begun before). */
  forget(credential: string): void {
    this.seen.delete(credential);
    this.probes.delete(credential);
    this.forgets++;
  }

  /** What was seen of every live credential may be out of date; dead ones stay dead. */
  forgetLive(): void {
    this.seen.clear();
    this.probes.clear();
    this.epoch++;
  }

  /**
   * The first sighting of a credential: `lookUp` runs once for all concurrent callers
   * with the same credential, and what it found is remembered (`remembered` of it;
   * null: dead).
   */
  probe<Found>(credential: string, lookUp: () => Promise<Found | null>, remembered: (found: Found) => Seen): Promise<Found | null> {
    const running = this.probes.get(credential);
    if (running) return running as Promise<Found | null>;
    const epoch = this.epoch;
    const forgets = this.forgets;
    // Only its own entry: a `forget` meanwhile may have let a newer probe of the credential begin.
    const done = () => {
      if (this.probes.get(credential) === probe) this.probes.delete(credential);
    };
    const probe: Promise<Found | null> = lookUp().then(
      (found) => {
        done();
        if (found === null) this.markDead(credential);
        else if (this.epoch === epoch && this.forgets === forgets) this.markLive(credential, remembered(found));
        return found;
      },
      (error: unknown) => {
        done();
        throw error;
      },
    );
    this.probes.set(credential, probe);
    return probe;
  }
}

function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) map.delete(map.keys().next().value!);
}
