import type { Migration } from '#platform/database';

/**
 * Payout ids are integers (spec): one sequence hands them out.
 *
 * - An orderId is claimed for one payout id before the payout's stream is written, so a
 *   repeat of the request (or many at once) lands on the same payout; a claim whose
 *   payout the ledger refused is given up, so the merchant can try the same orderId
 *   again later. `claimed_at` (database time): a claim whose payout is still unwritten
 *   is taken as its dead request's once it is ORDER_ID_CLAIM_GRACE_SECONDS old, counted
 *   from the claim, not from when a retry first sees it (a retry that first waited out
 *   the dead request's Idempotency-Key lease finds the claim already that old).
 * - A payout without orderId asked for under an Idempotency-Key: the key's request
 *   (keyedRequestDigest 'payout') claims one payout id before the payout's stream is
 *   written, so a retry (after a crash too, or while the first still runs) reaches that
 *   payout and never a second one. Kept for good, as the payout is.
 */
export const payoutIdsMigration: Migration = {
  id: 'payments:0008_payout_ids',
  sql: `
CREATE SEQUENCE payout_ids AS bigint START 1;
CREATE TABLE payout_order_ids (
  account_id uuid NOT NULL,
  order_id text NOT NULL,
  payout_id bigint NOT NULL,
  claimed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, order_id)
);
CREATE TABLE payout_request_keys (
  account_id uuid NOT NULL,
  request_key text NOT NULL,
  payout_id bigint NOT NULL,
  PRIMARY KEY (account_id, request_key)
);
`,
};

/** How long (database time) an orderId's claim may stay without its payout before a retry takes it over (its age then starts again). */
export const ORDER_ID_CLAIM_GRACE_SECONDS = 5;
