import type { Pool } from 'pg';
import { inTransaction } from '#platform/database';

/**
 * Endpoint health: a project's webhook endpoint whose attempts have all failed for
 * ENDPOINT_FAILING_DAYS in a row (from its first failed attempt after its last success
 * or its last re-enabling, on the gateway clock), and that still has a delivery being
 * retried, is disabled: its pending deliveries
 * stop (failed), and the outbox records new ones as failed without sending them. The
 * operator re-enables it (console, or POST /admin/v1/projects/{id}/webhook-endpoint/enable),
 * which resends every failed delivery still kept: what the merchant is owed.
 */
export const ENDPOINT_FAILING_DAYS = 3;

/** An endpoint just disabled, as the operator's log line tells it. */
export interface DisabledEndpoint {
  readonly projectId: string;
  /** The host (and port) of its URL: the path and query may carry the merchant's own tokens. */
  readonly host: string;
  /** Its first failed attempt of the streak. */
  readonly failingSince: Date;
  /** Its pending deliveries stopped (failed) by the disabling. */
  readonly stoppedDeliveries: number;
}

/** Disables every endpoint failing for ENDPOINT_FAILING_DAYS as of `now`; answers the endpoints disabled. */
export async function disableFailingEndpoints(pool: Pool, now: Date): Promise<DisabledEndpoint[]> {
  // An attempt without a status code (no answer in time, refused, TLS or DNS) failed too.
  // Only attempts at the project's current URL since it last took effect (project_webhook_settings) count: a
  // changed URL is a new endpoint, and one changed back starts afresh too. Attempts of a delivery made before a resend
  // sent it to another URL (addressed_at) were made at the old one.
  // Only projects with a pending delivery that has failed (a small scan of the queue) are
  // looked at; of those, attempts of the last ENDPOINT_FAILING_DAYS + 1 days suffice: a
  // streak that old starts inside them.
  // Two statements in one transaction: the pending deliveries are stopped by a statement whose snapshot comes
  // after the projects are disabled, so a resend that committed while the first waited for a project's lock
  // (it holds the project for share) is seen and stopped too, not left queued against a disabled endpoint.
  return inTransaction(pool, async (tx) => {
    const r = await tx.query<{ id: string; url: string; since: Date }>(
      `WITH candidates AS (
       SELECT DISTINCT d.project_id FROM webhook_queue q JOIN webhook_deliveries d ON d.id = q.id WHERE q.attempts_made > 0),
     attempts AS (
       SELECT d.project_id, a.at, coalesce(a.status_code BETWEEN 200 AND 299, false) AS ok, coalesce(p.webhook_enabled_at, '-infinity') AS enabled_at
       FROM candidates c JOIN projects p ON p.id = c.project_id AND p.webhook_disabled_at IS NULL
       CROSS JOIN LATERAL (
         SELECT coalesce(min(s.valid_from), '-infinity') AS since FROM project_webhook_settings s
         WHERE s.project_id = p.id AND s.valid_from > coalesce((SELECT max(o.valid_from) FROM project_webhook_settings o
                                                                WHERE o.project_id = p.id AND o.webhook_url IS DISTINCT FROM p.webhook_url), '-infinity')) url
       JOIN webhook_deliveries d ON d.project_id = c.project_id AND d.url = p.webhook_url JOIN webhook_attempts a ON a.delivery_id = d.id
       WHERE d.created_at > $1::timestamptz - make_interval(days => $2 + 3) AND a.at > $1::timestamptz - make_interval(days => $2 + 1)
         AND NOT a.superseded AND a.at > coalesce(p.webhook_enabled_at, '-infinity') AND a.at > url.since
         AND a.at > coalesce(d.addressed_at, '-infinity')),
     streak AS (
       SELECT project_id, min(at) FILTER (WHERE NOT ok AND at > last_ok) AS since, min(enabled_at) AS enabled_at
       FROM (SELECT *, coalesce(max(at) FILTER (WHERE ok) OVER (PARTITION BY project_id), '-infinity') AS last_ok FROM attempts) t
       GROUP BY project_id),
     disabled AS (
       -- Checked again on the row as it is once locked: not disabled meanwhile, nor re-enabled since the streak was read.
       UPDATE projects p SET webhook_disabled_at = $1 FROM streak s
       WHERE p.id = s.project_id AND s.since <= $1::timestamptz - make_interval(days => $2)
         AND p.webhook_disabled_at IS NULL AND coalesce(p.webhook_enabled_at, '-infinity') = s.enabled_at RETURNING p.id, p.webhook_url AS url, s.since)
     SELECT id, url, since FROM disabled`,
      [now, ENDPOINT_FAILING_DAYS],
    );
    if (r.rows.length === 0) return [];
    const stopped = await tx.query<{ project_id: string; n: number }>(
      // Locked in id order first, as a batch of attempt records locks them (in scan order the two could deadlock,
      // and a record batch aborted so loses its attempts: made again, other merchants' too).
      `WITH locked AS MATERIALIZED (
         SELECT id FROM webhook_deliveries WHERE project_id = ANY ($1::uuid[]) AND status = 'pending' ORDER BY id FOR NO KEY UPDATE),
       stopped AS (
         UPDATE webhook_deliveries d SET status = 'failed', next_attempt_at = NULL
         FROM locked l WHERE d.id = l.id AND d.status = 'pending' RETURNING d.id, d.project_id),
       dequeued AS (DELETE FROM webhook_queue q USING stopped WHERE q.id = stopped.id)
       SELECT project_id, count(*)::int AS n FROM stopped GROUP BY project_id`,
      [r.rows.map((row) => row.id)],
    );
    return r.rows.map((row) => ({
      projectId: row.id,
      host: hostOf(row.url),
      failingSince: row.since,
      stoppedDeliveries: stopped.rows.find((s) => s.project_id === row.id)?.n ?? 0,
    }));
  });
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'an unparsable URL';
  }
}
