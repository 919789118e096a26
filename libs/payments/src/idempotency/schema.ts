import type { Migration } from '#platform/database';

/**
 * Idempotency keys of merchant POSTs, per project and mode (a retry sent with the new key
 * pair after a rotation is still the same operation): the request's fingerprint (method,
 * path, exact raw body), whether it is still running (and who runs it until when) or its
 * answer (status and body). `key_id`: the pair that first claimed the key, which names
 * the keyed steps (KeyedRequest). Logged: a key must survive a restart, since retries
 * come exactly then. Swept after the retention (24 h).
 */
export const idempotencyKeysMigration: Migration = {
  id: 'payments:0012_idempotency_keys',
  sql: `
CREATE TABLE idempotency_keys (
  key_id uuid NOT NULL,
  mode text NOT NULL CHECK (mode IN ('test', 'live')),
  idempotency_key text NOT NULL,
  fingerprint text NOT NULL,
  state text NOT NULL CHECK (state IN ('started', 'completed')),
  claim uuid NOT NULL,
  lease_until timestamptz NOT NULL,
  status integer,
  body text,
  created_at timestamptz NOT NULL,
  completed_at timestamptz,
  project_id uuid NOT NULL,
  PRIMARY KEY (project_id, mode, idempotency_key),
  CHECK ((state = 'completed') = (status IS NOT NULL AND body IS NOT NULL))
);
CREATE INDEX idempotency_keys_age ON idempotency_keys (created_at);
`,
};
