import { createHash, randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import { writeStatement, type Migration } from '#platform/database';

/**
 * The operator console's sessions, shared by every API process (two replicas behind
 * one balancer accept each other's sessions). A row holds the SHA-256 of the random
 * session id, never the id itself (a copy of the table opens no session), and the
 * fingerprint of the operator token it was opened with: a changed ADMIN_TOKEN ends
 * every session opened with the old one. Logged (not UNLOGGED): a database restart
 * does not log the operators out.
 */
export const operatorSessionsMigration: Migration = {
  id: 'payments:0013_operator_sessions',
  sql: `
CREATE TABLE operator_sessions (
  session_hash bytea PRIMARY KEY,
  token_fingerprint bytea NOT NULL,
  created_at timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX operator_sessions_expiry ON operator_sessions (expires_at);
`,
};

/** A session ends after this long without a request (the gateway clock). */
export const OPERATOR_SESSION_IDLE_SECONDS = 30 * 60;
/** A session ends this long after the login, however busy. */
export const OPERATOR_SESSION_LIFETIME_SECONDS = 12 * 60 * 60;

/** A session id: 256 random bits, base64url (43 characters). */
export const OPERATOR_SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

const hashOf = (sessionId: string): Buffer => createHash('sha256').update(sessionId).digest();

export class OperatorSessions {
  constructor(private readonly pool: Pick<Pool, 'query' | 'connect'>) {}

  /** Opens a session for a right token; answers its id (for the cookie only). Sessions past their time are swept here. */
  async open(tokenFingerprint: Buffer, now: Date): Promise<string> {
    const sessionId = randomBytes(32).toString('base64url');
    await writeStatement(
      this.pool,
      `WITH swept AS (
         DELETE FROM operator_sessions WHERE expires_at <= $3 OR last_seen_at <= $3::timestamptz - make_interval(secs => $5))
       INSERT INTO operator_sessions (session_hash, token_fingerprint, created_at, last_seen_at, expires_at)
       VALUES ($1, $2, $3, $3, $3::timestamptz + make_interval(secs => $4))`,
      [hashOf(sessionId), tokenFingerprint, now, OPERATOR_SESSION_LIFETIME_SECONDS, OPERATOR_SESSION_IDLE_SECONDS],
    );
    return sessionId;
  }

  /**
   * Whether the session is open as of `now` for this token (within its idle and
   * absolute lifetime); an open one is marked as used now (its idle time restarts).
   */
  async use(sessionId: string, tokenFingerprint: Buffer, now: Date): Promise<boolean> {
    if (!OPERATOR_SESSION_ID.test(sessionId)) return false;
    const r = await this.pool.query(
      `UPDATE operator_sessions SET last_seen_at = GREATEST(last_seen_at, $3)
       WHERE session_hash = $1 AND token_fingerprint = $2 AND expires_at > $3 AND last_seen_at > $3::timestamptz - make_interval(secs => $4)
       RETURNING 1`,
      [hashOf(sessionId), tokenFingerprint, now, OPERATOR_SESSION_IDLE_SECONDS],
    );
    return r.rowCount === 1;
  }

  /** Ends the session (logout); its answer lost: WriteOutcomeUnknownError (the 503 that says it may have been done). */
  async close(sessionId: string): Promise<void> {
    if (!OPERATOR_SESSION_ID.test(sessionId)) return;
    await writeStatement(this.pool, 'DELETE FROM operator_sessions WHERE session_hash = $1', [hashOf(sessionId)]);
  }
}
