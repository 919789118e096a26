import type { Pool } from 'pg';
import { inTransaction } from '#platform/database';
import { SEALED_PREFIX, SecretBox } from '#platform/secrets';

/**
 * The projects' webhook secrets at rest: sealed with the SecretBox (AES-256-GCM), the
 * project id as associated data. These run at start (every process) and in
 * `secrets:rotate-key`.
 */

/** The associated data of a project's webhook secret. */
export const webhookSecretOwner = (projectId: string): string => `projects.webhook_secret:${projectId}`;

/**
 * A project's webhook secret that does not open: sealed for another project (the
 * project id is its associated data), with a key this process does not hold, or
 * altered. Its HMAC requests and webhooks stop until it is replaced.
 */
export class UnopenableWebhookSecretError extends Error {
  constructor(
    readonly projectId: string,
    cause: unknown,
  ) {
    super(
      `the webhook secret of project ${projectId} does not open (${(cause as Error).message}): it was sealed for another project or with ` +
        `another key; replace it: POST /admin/v1/projects/${projectId}/webhook-secret/rotate`,
      { cause },
    );
  }
}

/** A project's webhook secret, stored sealed, opened; UnopenableWebhookSecretError when it does not open. */
export function openWebhookSecret(stored: string, projectId: string, secrets: SecretBox): string {
  try {
    return secrets.open(stored, webhookSecretOwner(projectId));
  } catch (error) {
    throw new UnopenableWebhookSecretError(projectId, error);
  }
}

/** Stored webhook secrets are sealed with a key this process was not given: its configuration, nothing was changed. */
export class WebhookSecretKeysNotHeldError extends Error {
  override readonly name = 'WebhookSecretKeysNotHeldError';
}

/**
 * Refuses to start (WebhookSecretKeysNotHeldError) when a stored secret is sealed with
 * a key this process does not hold (another SECRETS_KEY, or another DATA_DIR's key
 * file): better than answering every HMAC request and webhook of those projects with an error.
 */
export async function checkWebhookSecretKeys(pool: Pool, box: SecretBox): Promise<void> {
  const r = await pool.query<{ key_id: string; projects: string }>(
    `SELECT split_part(webhook_secret, ':', 3) AS key_id, count(*) AS projects FROM projects
     WHERE webhook_secret LIKE $1 GROUP BY 1`,
    [`${SEALED_PREFIX}%`],
  );
  const held = new Set(box.keyIds());
  const missing = r.rows.filter((row) => !held.has(row.key_id));
  if (missing.length > 0) {
    throw new WebhookSecretKeysNotHeldError(
      `webhook secrets of ${missing.map((m) => `${m.projects} project(s) are sealed with key ${m.key_id}`).join(', ')}, ` +
        `which this process does not hold (it holds ${[...held].join(', ')}): give every process of one database the same SECRETS_KEY ` +
        '(or the same DATA_DIR/secrets.key)',
    );
  }
}

/**
 * The projects whose stored webhook secret does not open with `box` (sealed for another
 * project, with a key it does not hold, or altered), read in batches by id.
 */
export async function unopenableWebhookSecrets(pool: Pool, box: SecretBox, batchSize = 500): Promise<UnopenableWebhookSecretError[]> {
  const found: UnopenableWebhookSecretError[] = [];
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    const rows = await pool.query<{ id: string; webhook_secret: string }>('SELECT id, webhook_secret FROM projects WHERE id > $1::uuid ORDER BY id LIMIT $2', [
      after,
      batchSize,
    ]);
    for (const row of rows.rows) {
      try {
        openWebhookSecret(row.webhook_secret, row.id, box);
      } catch (error) {
        if (!(error instanceof UnopenableWebhookSecretError)) throw error;
        found.push(error);
      }
    }
    if (rows.rows.length < batchSize) return found;
    after = rows.rows[rows.rows.length - 1]!.id;
  }
}

/**
 * Seals again with the current key every webhook secret sealed with an older one (a
 * rotation). In batches, each in its own transaction with its rows locked, until none
 * is left; answers how many were sealed.
 */
export async function resealWebhookSecrets(pool: Pool, box: SecretBox, batchSize = 500): Promise<number> {
  let total = 0;
  for (;;) {
    const current = `${SEALED_PREFIX}${box.currentKeyId}:%`;
    const done = await inTransaction(pool, async (client) => {
      const rows = await client.query<{ id: string; webhook_secret: string }>(
        `SELECT id, webhook_secret FROM projects WHERE webhook_secret NOT LIKE $1 ORDER BY id LIMIT $2 FOR UPDATE`,
        [current, batchSize],
      );
      for (const row of rows.rows) {
        const owner = webhookSecretOwner(row.id);
        await client.query('UPDATE projects SET webhook_secret = $2 WHERE id = $1', [
          row.id,
          box.seal(openWebhookSecret(row.webhook_secret, row.id, box), owner),
        ]);
      }
      return rows.rows.length;
    });
    total += done;
    if (done === 0) return total;
  }
}
