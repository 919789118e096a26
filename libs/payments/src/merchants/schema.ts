import type { Migration } from '#platform/database';

/**
 * The registry: accounts, their projects and the projects' API key pairs.
 *
 * - `webhook_secret_changes` counts the statements that changed projects.webhook_secret
 *   (a replaced secret after a leak, a re-sealing): the API processes watch it and
 *   forget the secrets they remember for public ids when it moves
 *   (Registry.followWebhookSecretChanges), so a secret changed by hand in SQL holds in
 *   every process within a poll.
 * - `project_webhook_settings`: a project's webhook settings from each change on
 *   (gateway clock), written at creation and at each change. The outbox addresses an
 *   event with the settings in force when it happened, not when it reaches the outbox
 *   (a lagging or stopped projector), so a subscription change applies to events from
 *   then on.
 */
export const registryMigration: Migration = {
  id: 'payments:0003_registry',
  sql: `
CREATE TABLE accounts (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  email text NOT NULL,
  created_at timestamptz NOT NULL
);

CREATE TABLE projects (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id),
  name text NOT NULL,
  status text NOT NULL CHECK (status IN ('active', 'pending', 'rejected', 'blocked')),
  webhook_url text,
  webhook_events text[] NOT NULL,
  usdt_enabled boolean NOT NULL,
  hold_hours integer NOT NULL CHECK (hold_hours >= 0),
  methods jsonb NOT NULL,
  customer_fee_share integer NOT NULL CHECK (customer_fee_share BETWEEN 0 AND 100),
  webhook_secret text NOT NULL,
  -- secret namespace of the project's invoice ids (derived from orderId, not guessable)
  id_namespace uuid NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  webhook_disabled_at timestamptz,
  webhook_enabled_at timestamptz,
  -- Webhook secrets are stored sealed (AES-256-GCM, libs/secrets): the table refuses a plain one.
  CONSTRAINT projects_webhook_secret_sealed CHECK (webhook_secret LIKE 'sealed:v1:%')
);
CREATE INDEX projects_account ON projects (account_id);

CREATE TABLE api_keys (
  id uuid PRIMARY KEY,
  project_id uuid NOT NULL REFERENCES projects (id),
  mode text NOT NULL CHECK (mode IN ('test', 'live')),
  secret_key_hash text NOT NULL UNIQUE,
  public_key text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  revoked_at timestamptz
);
CREATE UNIQUE INDEX api_keys_one_active_per_mode ON api_keys (project_id, mode) WHERE revoked_at IS NULL;
CREATE INDEX api_keys_project ON api_keys (project_id);

-- How many times a statement changed projects.webhook_secret: see above.
CREATE TABLE webhook_secret_changes (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  generation bigint NOT NULL
);
INSERT INTO webhook_secret_changes (only_row, generation) VALUES (true, 0);
CREATE FUNCTION count_webhook_secret_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE webhook_secret_changes SET generation = generation + 1;
  RETURN NULL;
END $$;
CREATE TRIGGER projects_webhook_secret_changes AFTER UPDATE OF webhook_secret ON projects
  FOR EACH STATEMENT EXECUTE FUNCTION count_webhook_secret_changes();

-- Each project's webhook settings from each change on: see above.
CREATE TABLE project_webhook_settings (
  project_id uuid NOT NULL REFERENCES projects (id),
  valid_from timestamptz NOT NULL,
  webhook_url text,
  webhook_events text[] NOT NULL,
  PRIMARY KEY (project_id, valid_from)
);
`,
};
