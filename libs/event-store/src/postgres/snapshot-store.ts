import type { Pool } from 'pg';
import type { Migration } from '#platform/database';
import type { SnapshotStore } from '../decider';

export const snapshotsMigration: Migration = {
  id: 'event-store:0003_aggregate_snapshots',
  sql: `
CREATE TABLE aggregate_snapshots (
  stream_name text PRIMARY KEY,
  revision bigint NOT NULL,
  schema_version integer NOT NULL,
  state jsonb NOT NULL,
  taken_at timestamptz NOT NULL DEFAULT now()
);
`,
};

/** Snapshots in PostgreSQL (whatever the event store): a newer one replaces an older one, never the reverse. */
export class PostgresSnapshotStore implements SnapshotStore {
  constructor(private readonly pool: Pool) {}

  async load(streamName: string) {
    const result = await this.pool.query<{ revision: string; schema_version: number; state: unknown }>(
      'SELECT revision, schema_version, state FROM aggregate_snapshots WHERE stream_name = $1',
      [streamName],
    );
    const row = result.rows[0];
    return row ? { revision: BigInt(row.revision), schemaVersion: row.schema_version, state: row.state } : null;
  }

  async save(streamName: string, revision: bigint, schemaVersion: number, state: unknown): Promise<void> {
    await this.pool.query(
      `INSERT INTO aggregate_snapshots AS s (stream_name, revision, schema_version, state) VALUES ($1, $2, $3, $4)
       ON CONFLICT (stream_name) DO UPDATE SET revision = EXCLUDED.revision, schema_version = EXCLUDED.schema_version,
         state = EXCLUDED.state, taken_at = now()
       WHERE s.revision < EXCLUDED.revision OR s.schema_version <> EXCLUDED.schema_version`,
      [streamName, revision.toString(), schemaVersion, JSON.stringify(state)],
    );
  }

  async discard(streamName: string, revision: bigint, schemaVersion: number): Promise<void> {
    await this.pool.query('DELETE FROM aggregate_snapshots WHERE stream_name = $1 AND revision = $2 AND schema_version = $3', [
      streamName,
      revision.toString(),
      schemaVersion,
    ]);
  }
}
