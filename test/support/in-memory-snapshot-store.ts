import type { SnapshotStore } from '#event-store';

/** Snapshots in memory, with PostgresSnapshotStore's rule: a newer one replaces an older one, never the reverse. */
export class InMemorySnapshotStore implements SnapshotStore {
  readonly snapshots = new Map<string, { revision: bigint; schemaVersion: number; state: unknown }>();

  async load(streamName: string) {
    const stored = this.snapshots.get(streamName);
    // As stored in jsonb: a copy, never the object the writer still holds.
    return stored ? { ...stored, state: JSON.parse(JSON.stringify(stored.state)) as unknown } : null;
  }

  async save(streamName: string, revision: bigint, schemaVersion: number, state: unknown): Promise<void> {
    const stored = this.snapshots.get(streamName);
    if (stored && stored.revision >= revision && stored.schemaVersion === schemaVersion) return;
    this.snapshots.set(streamName, { revision, schemaVersion, state: JSON.parse(JSON.stringify(state)) as unknown });
  }

  async discard(streamName: string, revision: bigint, schemaVersion: number): Promise<void> {
    const stored = this.snapshots.get(streamName);
    if (stored && stored.revision === revision && stored.schemaVersion === schemaVersion) this.snapshots.delete(streamName);
  }
}
