import type { Migration } from '../../database/src';

export const projectionsMigration: Migration = {
  version: 2,
  name: 'projection_checkpoints',
  sql: `
CREATE TABLE projection_checkpoints (
  projection text PRIMARY KEY,
  commit_position numeric(20) NOT NULL DEFAULT 0,
  prepare_position numeric(20) NOT NULL DEFAULT 0,
  events_applied bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now(),
  rebuild_started_at timestamptz
);
`,
};
