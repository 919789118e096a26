import type { Pool } from 'pg';
import type { LogVisibility } from '#event-store';

/** One projection run by this process: its runner's state and how far its read model is behind the log. */
export interface ProjectionReadiness {
  readonly projection: string;
  readonly state: string;
  readonly checkpoint: string | null;
  readonly lastError: string | null;
  /** Events of the global log after the stored checkpoint (counted up to 10 000); null when unknown. */
  readonly lag?: number | null;
}

/** What the readiness check also asks of the process (e.g. its projector's state). */
export interface ReadinessReport {
  readonly projections?: readonly ProjectionReadiness[];
  /**
   * With the PostgreSQL event store: events appended but not yet visible to
   * subscribers, how long the oldest has waited, and the cluster's oldest transaction
   * holding them back (null when the database could not be asked).
   */
  readonly eventLog?: LogVisibility | null;
  /**
   * The read models being rebuilt (`projections:rebuild`, or a projector finishing an
   * interrupted one): since when, and the share of the log their checkpoint has
   * passed. Their routes answer 503 meanwhile.
   */
  readonly rebuilds?: readonly { readonly projection: string; readonly startedAt: string; readonly progress: number }[];
}
export type ReadinessProbe = () => ReadinessReport | Promise<ReadinessReport>;

/**
 * GET /health/ready, for the API port and the metrics port alike. 503 when the
 * database does not answer within READINESS_DEADLINE_MS: nothing can be served then. A projection that lags or
 * fails does not make the process unready (writes and most reads still work, and a
 * load balancer taking every replica out would stop all payments): it shows here
 * and in projection_lag_events / projection_batch_failures_total, for alerts. The
 * same holds for a visible log that trails the appended one (`eventLog`), and for read
 * models being rebuilt (`rebuilds`, with their progress).
 */
export async function readiness(pool: Pool, probe: ReadinessProbe): Promise<{ status: number; body: Record<string, unknown> }> {
  const [database, report] = await Promise.all([
    within(
      READINESS_DEADLINE_MS,
      pool.query('SELECT 1').then(
        () => 'ok' as const,
        () => 'unreachable' as const,
      ),
      'unreachable' as const,
    ),
    within(
      READINESS_DEADLINE_MS,
      Promise.resolve()
        .then(probe)
        .catch((): ReadinessReport => ({})),
      {},
    ),
  ]);
  const ready = database === 'ok';
  return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready', ready, database, ...report } };
}

/**
 * How long readiness waits for the database: one that does not answer by then (frozen,
 * or every connection stuck) is unreachable, so a load balancer hears it in time
 * instead of waiting with the requests.
 */
export const READINESS_DEADLINE_MS = 5_000;

/** `work`'s value, or `fallback` when it has none after `ms`. */
function within<T>(ms: number, work: Promise<T>, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => (timer = setTimeout(() => resolve(fallback), ms).unref()));
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** What anyone may see of readiness: the status alone (projection errors and checkpoints are for the operator). */
export function publicReadiness(body: Record<string, unknown>): { status: unknown } {
  return { status: body.status };
}
