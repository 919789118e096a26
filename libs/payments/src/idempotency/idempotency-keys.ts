import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { Clock } from '#platform/clock';
import { preparedStatement } from '#platform/database';
import { IDEMPOTENCY_RETENTION_HOURS, KeyedRequest } from './keyed-request';

/** What to do with a keyed request. */
export type Admission =
  /**
   * Run it: this request holds the key (`claim`, its lease renewed until stopRenewing)
   * until its answer is stored. `keyId`: the key pair of the key's first claimant, which
   * names the keyed steps (this request's own pair unless it took the key over).
   */
  | { readonly kind: 'run'; readonly claim: string; readonly takenOver: boolean; readonly keyId: string }
  /** The key's first answer, to send again as it was. */
  | { readonly kind: 'replay'; readonly status: number; readonly body: string }
  /** The key was used with another request (method, path or body). */
  | { readonly kind: 'conflict' }
  /** Another request with the key is still running after the whole wait. */
  | { readonly kind: 'busy' };

export interface IdempotencyTiming {
  /**
   * How long (database time) a running request holds its key unrenewed. Its process
   * renews it every third of this while the request runs, so only a holder that died
   * (SIGKILL, a lost connection) is taken over, once it runs out; an advance of the
   * manual clock does not end it.
   */
  readonly leaseSeconds: number;
  /** How long (real time) a request waits for another with its key to answer; longer than the lease. */
  readonly waitMs: number;
}

export const IDEMPOTENCY_TIMING: IdempotencyTiming = { leaseSeconds: 5, waitMs: 6_000 };

const SWEEP_EVERY_MS = 60_000;

const CLAIM = `
INSERT INTO idempotency_keys (project_id, mode, idempotency_key, key_id, fingerprint, state, claim, lease_until, created_at)
VALUES ($1, $2, $3, $4, $5, 'started', $6, clock_timestamp() + make_interval(secs => $7), $8)
ON CONFLICT (project_id, mode, idempotency_key)
DO UPDATE SET claim = EXCLUDED.claim, lease_until = EXCLUDED.lease_until
  WHERE idempotency_keys.state = 'started'
    AND idempotency_keys.fingerprint = EXCLUDED.fingerprint
    AND idempotency_keys.lease_until <= clock_timestamp()
RETURNING (xmax = 0) AS fresh, key_id::text AS key_id`;

// Every lease this process holds, in one statement by primary key: the claims still the keys' come back.
const RENEW = `
UPDATE idempotency_keys k SET lease_until = clock_timestamp() + make_interval(secs => $5)
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[]) AS held(project_id, mode, idempotency_key, claim)
WHERE k.project_id = held.project_id AND k.mode = held.mode AND k.idempotency_key = held.idempotency_key
  AND k.state = 'started' AND k.claim = held.claim
RETURNING k.claim::text AS claim`;

/** The releases still to do, in one claim-guarded statement (a takeover's row has another claim, and stays). */
const RELEASE_ALL = `
DELETE FROM idempotency_keys k
USING unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[]) AS released(project_id, mode, idempotency_key, claim)
WHERE k.project_id = released.project_id AND k.mode = released.mode AND k.idempotency_key = released.idempotency_key
  AND k.state = 'started' AND k.claim = released.claim`;

const READ = `SELECT fingerprint, state, status, body FROM idempotency_keys WHERE project_id = $1 AND mode = $2 AND idempotency_key = $3`;

const COMPLETE = `
UPDATE idempotency_keys SET state = 'completed', status = $5, body = $6, completed_at = $7
WHERE project_id = $1 AND mode = $2 AND idempotency_key = $3 AND fingerprint = $4 AND state = 'started'`;

interface KeyRow {
  fingerprint: string;
  state: 'started' | 'completed';
  status: number | null;
  body: string | null;
}

/**
 * How long a lease is renewed at most: past every bound of a request's work (a 30 s
 * statement timeout, a few steps), so a request whose answer never reaches the hook
 * cannot hold its key for the life of the process; its key is then taken over as a
 * dead process's is, and the keyed steps make a second run harmless.
 */
const RENEW_AT_MOST_MS = 120_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The idempotency keys of merchant POSTs, shared by every API process (a table):
 * the first request with a key runs, a repeat with the same request gets its answer
 * again, a repeat with another request is refused, and a repeat while the first
 * still runs waits for its answer. The stored answer is a cache of what the keyed
 * steps decided: those steps are themselves safe to run again (a refund's id and a
 * payout's claim derive from the key), so a request whose holder died is simply run
 * again by the next retry.
 */
export class IdempotencyKeys {
  private lastSweep = Number.NEGATIVE_INFINITY;
  /** The claims this process holds, each with its key and when its renewal ends (performance.now()). */
  private readonly held = new Map<string, { readonly request: KeyedRequest; readonly until: number }>();
  /**
   * Releases asked for and not done: the 503 that wrote nothing was usually the database
   * going away, and the release with it. Tried again at each tick until done (guarded by
   * the claim, so a takeover's row is never deleted); the oldest forgotten past 10,000.
   */
  private readonly unreleased = new Map<string, KeyedRequest>();
  /** The one timer renewing every held lease and retrying releases; null when there is neither. */
  private renewals: NodeJS.Timeout | null = null;
  private renewing = false;
  private releasing = false;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly timing: IdempotencyTiming = IDEMPOTENCY_TIMING,
  ) {}

  async admit(request: KeyedRequest): Promise<Admission> {
    await this.sweep();
    const deadline = performance.now() + this.timing.waitMs;
    let pause = 10;
    for (;;) {
      const claim = randomUUID();
      const claimed = await this.pool.query<{ fresh: boolean; key_id: string }>(
        preparedStatement(CLAIM, [
          request.projectId,
          request.mode,
          request.key,
          request.keyId,
          request.fingerprint,
          claim,
          this.timing.leaseSeconds,
          this.clock.now(),
        ]),
      );
      if (claimed.rows[0]) {
        this.renew(request, claim);
        return { kind: 'run', claim, takenOver: !claimed.rows[0].fresh, keyId: claimed.rows[0].key_id };
      }
      const row = (await this.pool.query<KeyRow>(preparedStatement(READ, [request.projectId, request.mode, request.key]))).rows[0];
      // Gone meanwhile (swept): claim it again.
      if (!row) continue;
      if (row.fingerprint !== request.fingerprint) return { kind: 'conflict' };
      if (row.state === 'completed') return { kind: 'replay', status: row.status!, body: row.body! };
      const left = deadline - performance.now();
      if (left <= 0) return { kind: 'busy' };
      await sleep(Math.min(pause, left));
      pause = Math.min(pause * 2, 200);
    }
  }

  /**
   * Stops renewing the lease of a claim this process holds: its request answered (its
   * answer is then stored or the key let go), or this process stops. A claim no longer
   * renewed is taken over once its lease runs out, as a dead process's is.
   */
  stopRenewing(claim: string): void {
    this.held.delete(claim);
    this.stopTimerIfIdle();
  }

  private stopTimerIfIdle(): void {
    if (this.held.size === 0 && this.unreleased.size === 0 && this.renewals !== null) {
      clearInterval(this.renewals);
      this.renewals = null;
    }
  }

  /** Stops renewing every lease this process holds. */
  close(): void {
    this.closed = true;
    this.unreleased.clear();
    for (const claim of [...this.held.keys()]) this.stopRenewing(claim);
    this.stopTimerIfIdle();
  }

  /**
   * Stores the answer of a request that ran. When another run of the same key stored
   * its answer first (a takeover), that one is the key's answer: it is returned, to be
   * sent instead, so every request with the key gets the same answer.
   */
  async complete(request: KeyedRequest, status: number, body: string): Promise<{ readonly status: number; readonly body: string } | null> {
    const stored = await this.pool.query(
      preparedStatement(COMPLETE, [request.projectId, request.mode, request.key, request.fingerprint, status, body, this.clock.now()]),
    );
    if (stored.rowCount === 1) return null;
    const row = (await this.pool.query<KeyRow>(preparedStatement(READ, [request.projectId, request.mode, request.key]))).rows[0];
    return row && row.state === 'completed' && row.fingerprint === request.fingerprint ? { status: row.status!, body: row.body! } : null;
  }

  /**
   * Ends the claim after an answer that is not stored (5xx). `release`: nothing was
   * written under the key (a fresh claim answered by a 5xx that says so), so its row is
   * deleted and the key may name any request. Otherwise its lease ends now, so the next
   * retry takes it over at once and runs the request again; the row stays, with its
   * first pair and fingerprint: the retry (under any pair of the project) reaches what an
   * earlier run may have written, and another request under the key is refused.
   */
  async abandon(request: KeyedRequest, claim: string, release = false): Promise<void> {
    this.stopRenewing(claim);
    if (!release) {
      await this.pool.query(
        `UPDATE idempotency_keys SET lease_until = clock_timestamp() WHERE project_id = $1 AND mode = $2 AND idempotency_key = $3 AND state = 'started' AND claim = $4`,
        [request.projectId, request.mode, request.key, claim],
      );
      return;
    }
    try {
      await this.release(request, claim);
    } catch (error) {
      // Kept to be released at the next ticks (the lease ends on its own meanwhile).
      if (this.closed) throw error;
      this.unreleased.set(claim, request);
      if (this.unreleased.size > 10_000) this.unreleased.delete(this.unreleased.keys().next().value!);
      this.tick();
      throw error;
    }
  }

  private async release(request: KeyedRequest, claim: string): Promise<void> {
    await this.pool.query(`DELETE FROM idempotency_keys WHERE project_id = $1 AND mode = $2 AND idempotency_key = $3 AND state = 'started' AND claim = $4`, [
      request.projectId,
      request.mode,
      request.key,
      claim,
    ]);
  }

  /**
   * Renews the claim's lease every third of it until stopRenewing, or until the claim is
   * no longer the key's (answered, let go, or taken over after a renewal came too late),
   * for RENEW_AT_MOST_MS at most. Every held lease is renewed by one statement per tick
   * (one pool connection, however many keys run); a renewal that fails is tried again
   * at the next tick; the timer keeps no process alive.
   */
  private renew(request: KeyedRequest, claim: string): void {
    this.held.set(claim, { request, until: performance.now() + RENEW_AT_MOST_MS });
    this.tick();
  }

  /** Starts the one timer if it is not running. */
  private tick(): void {
    if (this.renewals !== null || this.closed) return;
    this.renewals = setInterval(() => void this.renewHeld(), (this.timing.leaseSeconds * 1000) / 3);
    this.renewals.unref();
  }

  private async renewHeld(): Promise<void> {
    // Beside the renewals, never before them: a release waiting for a connection must not hold a lease up.
    void this.retryReleases();
    if (this.renewing) return;
    this.renewing = true;
    try {
      await this.renewLeases();
    } catch {
      // Tried again at the next tick.
    } finally {
      this.renewing = false;
    }
    this.stopTimerIfIdle();
  }

  private async renewLeases(): Promise<void> {
    const now = performance.now();
    for (const [claim, { until }] of this.held) if (now > until) this.stopRenewing(claim);
    const held = [...this.held];
    if (held.length === 0) return;
    const renewed = await this.pool.query<{ claim: string }>(
      preparedStatement(RENEW, [
        held.map(([, h]) => h.request.projectId),
        held.map(([, h]) => h.request.mode),
        held.map(([, h]) => h.request.key),
        held.map(([claim]) => claim),
        this.timing.leaseSeconds,
      ]),
    );
    const still = new Set(renewed.rows.map((r) => r.claim));
    for (const [claim] of held) if (!still.has(claim)) this.stopRenewing(claim);
  }

  /** The releases not done yet, together; kept for the next tick should the database still be away. */
  private async retryReleases(): Promise<void> {
    const released = [...this.unreleased];
    if (released.length === 0 || this.releasing) return;
    this.releasing = true;
    try {
      await this.pool.query(
        preparedStatement(RELEASE_ALL, [
          released.map(([, r]) => r.projectId),
          released.map(([, r]) => r.mode),
          released.map(([, r]) => r.key),
          released.map(([claim]) => claim),
        ]),
      );
      for (const [claim] of released) this.unreleased.delete(claim);
    } catch {
      // Tried again at the next tick.
    } finally {
      this.releasing = false;
    }
    this.stopTimerIfIdle();
  }

  /** Forgets keys older than the retention, at most once a minute (gateway clock) per process. */
  private async sweep(): Promise<void> {
    const now = this.clock.now().getTime();
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    await this.pool.query('DELETE FROM idempotency_keys WHERE created_at < $1', [new Date(now - IDEMPOTENCY_RETENTION_HOURS * 3_600_000)]);
  }
}
