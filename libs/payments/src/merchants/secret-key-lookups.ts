import type { PollMarkRequest } from '../access/access-control';

/** What one request's Bearer lookup asks: its key (hashed), the mode its prefix claims, its rate window, its poll mark. */
export interface SecretKeyLookupRequest {
  readonly secretKeyHash: string;
  readonly mode: string;
  readonly windowSecond: number;
  readonly pollMark: PollMarkRequest | null;
}

/** One request's Bearer lookup, waiting for the statement of its event-loop turn (Registry.identifyBySecretKeyCountingRequest). */
export interface SecretKeyLookup<Result> extends SecretKeyLookupRequest {
  readonly resolve: (result: Result | null) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The batches one statement can serve: the poll interval is one parameter of the
 * statement, so lookups whose marks have different intervals go in different
 * statements (in practice every mark has the process's one interval). Lookups without
 * a mark join the first batch. Arrival order is kept inside each batch.
 */
export function batchesByPollInterval<L extends { readonly pollMark: PollMarkRequest | null }>(lookups: readonly L[]): L[][] {
  const byInterval = new Map<number | null, L[]>();
  for (const lookup of lookups) {
    const interval = lookup.pollMark?.intervalSeconds ?? null;
    const batch = byInterval.get(interval);
    if (batch) batch.push(lookup);
    else byInterval.set(interval, [lookup]);
  }
  const unmarked = byInterval.get(null);
  byInterval.delete(null);
  const batches = [...byInterval.values()];
  if (unmarked === undefined) return batches;
  if (batches.length === 0) return [unmarked];
  // Unmarked lookups merged into the first batch, arrival order kept.
  const first = new Set<L>([...batches[0]!, ...unmarked]);
  batches[0] = lookups.filter((l) => first.has(l));
  return batches;
}

/**
 * One statement for the Bearer lookups of a turn. Per lookup ($1..$6 are arrays, one
 * element per lookup in arrival order; $7 the poll interval in seconds):
 * - the key identified by its hash, not revoked, of the mode its prefix claims;
 * - the request counted in its key's one-second window: the lookups of one key and
 *   window add their number to the row at once, and each gets the count it would have
 *   got counted alone in arrival order (`hits` = the row's new total − the batch's
 *   number + its rank), so two requests of a key in one batch count 2 and the row in
 *   PostgreSQL stays the one count every process shares;
 * - the poll mark of a read (`$4` names the resource, null for none) taken for the
 *   first lookup of its key and resource that is within the rate (`hits ≤ $6`): one
 *   statement cannot touch a row twice, and a second read of the same resource in the
 *   same turn is refused by the mark the first one takes. The others of the group see
 *   the mark's moment (the one just taken, or the stored one).
 * Rows are locked in one order (rate windows by key and second, then poll marks by
 * key and resource), as the single lookup locks one of each in the same table order.
 * `columns` are the project's columns (alias `p`).
 */
export const batchedLookupStatement = (columns: string): string => `WITH request AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::timestamptz[], $6::int[]) WITH ORDINALITY
    AS r(secret_key_hash, mode, window_second, poll_resource, poll_at, counted_up_to, ord)
), found AS (
  SELECT r.ord, r.window_second, r.poll_resource, r.poll_at, r.counted_up_to, k.id AS key_id, k.mode AS key_mode, k.project_id
  FROM request r JOIN api_keys k ON k.secret_key_hash = r.secret_key_hash AND k.revoked_at IS NULL AND k.mode = r.mode
), counted AS (
  INSERT INTO rate_limit_windows (key_id, window_second, hits)
  SELECT key_id, window_second, count(*) FROM found GROUP BY key_id, window_second ORDER BY key_id, window_second
  ON CONFLICT (key_id, window_second) DO UPDATE SET hits = rate_limit_windows.hits + EXCLUDED.hits
  RETURNING key_id, window_second, hits
), numbered AS (
  SELECT f.*, (c.hits - count(*) OVER same_window + row_number() OVER (same_window ORDER BY f.ord))::int AS hits
  FROM found f JOIN counted c ON c.key_id = f.key_id AND c.window_second = f.window_second
  WINDOW same_window AS (PARTITION BY f.key_id, f.window_second)
), candidate AS (
  SELECT DISTINCT ON (key_id, poll_resource) key_id, poll_resource, poll_at, ord
  FROM numbered WHERE poll_resource IS NOT NULL AND hits <= counted_up_to
  ORDER BY key_id, poll_resource, ord
), marked AS (
  INSERT INTO poll_marks (key_id, resource, last_at)
  SELECT key_id, poll_resource, poll_at FROM candidate ORDER BY key_id, poll_resource
  ON CONFLICT (key_id, resource) DO UPDATE SET last_at = EXCLUDED.last_at
  WHERE poll_marks.last_at <= EXCLUDED.last_at - make_interval(secs => $7)
  RETURNING key_id, resource
)
SELECT n.ord::int AS ord, ${columns}, n.key_id, n.key_mode, n.hits,
  (m.key_id IS NOT NULL AND c.ord = n.ord) AS poll_taken,
  CASE WHEN m.key_id IS NOT NULL THEN c.poll_at
    ELSE (SELECT pm.last_at FROM poll_marks pm WHERE pm.key_id = n.key_id AND pm.resource = n.poll_resource) END AS poll_last_at
FROM numbered n JOIN projects p ON p.id = n.project_id
LEFT JOIN candidate c ON c.key_id = n.key_id AND c.poll_resource = n.poll_resource
LEFT JOIN marked m ON m.key_id = n.key_id AND m.resource = n.poll_resource`;

/** The statement's parameters for a batch, in arrival order. */
export function batchedLookupParameters(lookups: readonly SecretKeyLookupRequest[]): unknown[] {
  const interval = lookups.find((l) => l.pollMark !== null)?.pollMark?.intervalSeconds ?? 0;
  return [
    lookups.map((l) => l.secretKeyHash),
    lookups.map((l) => l.mode),
    lookups.map((l) => l.windowSecond),
    lookups.map((l) => l.pollMark?.resource ?? null),
    lookups.map((l) => l.pollMark?.at ?? null),
    lookups.map((l) => l.pollMark?.countedUpTo ?? null),
    interval,
  ];
}
