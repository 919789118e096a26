import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool } from 'pg';
import { comparePositions, EventStore } from '#event-store';
import { PAYMENTS_TO_LEDGER } from '../reactors/payments-to-ledger.reactor';
import { PAYOUT_OUTCOMES, REFUND_OUTCOMES } from '../flows/outcomes';

/** An entry is decided before it is appended: one dated at or before an instant is in the log by this much after it. */
export const POSTING_MARGIN_MS = 1_000;
/** How long a report waits for its figures to be final before it answers 503 (Retry-After: 1). */
export const POSTED_WAIT_MS = 5_000;

/** The reactors that post a flow's ledger entries dated with the time of its event, after it: what a report over the log waits for. */
export const LEDGER_POSTERS: readonly string[] = [PAYMENTS_TO_LEDGER, REFUND_OUTCOMES, PAYOUT_OUTCOMES];

/**
 * Waits until no ledger entry dated at or before `at` is still to come, so that a report
 * as of `at` never changes afterwards (a signed statement least of all): `at` is more
 * than POSTING_MARGIN_MS past (what was decided by then is in the log), and every one of
 * `followers` (the reactors that post entries with their cause's time, and the read
 * models a report reads) has reached the head of the log as it is then (`now`: the
 * gateway clock's, when asked). True when so;
 * false when not within `waitMs` (a projector stopped or behind).
 */
export async function awaitPostedThrough(
  pool: Pick<Pool, 'query'>,
  store: Pick<EventStore, 'headPosition'>,
  now: Date,
  at: Date,
  followers: readonly string[],
  waitMs = POSTED_WAIT_MS,
): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  const early = at.getTime() + POSTING_MARGIN_MS - now.getTime();
  if (early > waitMs) return false;
  if (early > 0) await sleep(early);
  const head = await store.headPosition();
  if (head === null) return true;
  for (;;) {
    const rows = await pool.query<{ commit_position: string; prepare_position: string }>(
      `SELECT commit_position, prepare_position FROM projection_checkpoints WHERE projection = ANY($1)`,
      [followers],
    );
    const reached = rows.rows.filter((r) => comparePositions({ commit: BigInt(r.commit_position), prepare: BigInt(r.prepare_position) }, head) >= 0);
    if (reached.length === followers.length) return true;
    if (Date.now() >= deadline) return false;
    await sleep(50);
  }
}
