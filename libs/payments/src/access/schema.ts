import type { Migration } from '#platform/database';

/**
 * Shared by every API process (so the limits hold however many serve one key).
 * UNLOGGED: short-lived counters that need no crash safety or replication.
 */
export const accessControlMigration: Migration = {
  id: 'payments:0006_access_control',
  sql: `
CREATE UNLOGGED TABLE used_signatures (
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

/**
 * Used signatures survive a crash: an UNLOGGED table is emptied by crash recovery,
 * after which a captured HMAC request could be replayed within its 300 s timestamp
 * window. The counters (rate windows, poll marks) stay unlogged: losing them only
 * resets a limit for a second or an interval.
 */
export const usedSignaturesLoggedMigration: Migration = {
  id: 'payments:0017_used_signatures_logged',
  sql: `
ALTER TABLE used_signatures SET LOGGED;
`,
};
