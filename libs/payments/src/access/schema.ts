import type { Migration } from '#platform/database';

/**
 * Shared by every API process (so the limits hold however many serve one key). The
 * counters (rate windows, poll marks) are UNLOGGED: losing them in a crash only resets a
 * limit for a second or an interval. Used signatures are logged: an UNLOGGED table is
 * emptied by crash recovery, after which a captured HMAC request could be replayed
 * within its 300 s timestamp window.
 */
export const accessControlMigration: Migration = {
  id: 'payments:0006_access_control',
  sql: `
CREATE TABLE used_signatures (
  signature text PRIMARY KEY,
  used_at timestamptz NOT NULL
);
CREATE INDEX used_signatures_age ON used_signatures (used_at);

CREATE UNLOGGED TABLE rate_limit_windows (
  key_id uuid NOT NULL,
  window_second bigint NOT NULL,
  hits integer NOT NULL,
  PRIMARY KEY (key_id, window_second)
);

CREATE UNLOGGED TABLE poll_marks (
  key_id uuid NOT NULL,
  resource text NOT NULL,
  last_at timestamptz NOT NULL,
  PRIMARY KEY (key_id, resource)
);
CREATE INDEX poll_marks_age ON poll_marks (last_at);
`,
};
