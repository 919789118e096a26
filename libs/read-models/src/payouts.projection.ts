import type { PoolClient } from 'pg';
import type { Migration } from '../../database/src';
import type { RecordedEvent } from '../../event-store/src';
import { evolvePayout, initialPayout, Payout, PAYOUT_CATEGORY, PayoutEvent } from '../../domain/src';
import type { Projection } from '../../projections/src';
import { foldIntoRow } from './folded-row';

export const payoutsReadModelMigration: Migration = {
  version: 14,
  name: 'read_model_payouts',
  sql: `
CREATE TABLE payouts (
  -- order of arrival: lists page newest first on it
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id bigint PRIMARY KEY,
  account_id uuid NOT NULL,
  project_id uuid NOT NULL,
  order_id text,
  -- requested and refused are never shown; the others are the spec's statuses
  status text NOT NULL,
  created_at timestamptz NOT NULL,
  state jsonb NOT NULL,
  last_revision bigint NOT NULL
);
CREATE INDEX payouts_list ON payouts (account_id, seq DESC);
CREATE INDEX payouts_requested ON payouts (created_at) WHERE status = 'requested';
`,
};

/** Payouts for lists and the recovery worker; a single payout is read from its own stream. Idempotent by revision. */
export const payoutsProjection: Projection = {
  name: 'payouts',
  tables: ['payouts'],
  filter: { streamNamePrefixes: [`${PAYOUT_CATEGORY}-`] },
  async apply(tx: PoolClient, events: readonly RecordedEvent[]): Promise<void> {
    for (const recorded of events) {
      const event = { type: recorded.type, data: recorded.data } as unknown as PayoutEvent;
      const revision = recorded.revision.toString();
      if (event.type === 'PayoutRequested') {
        const d = event.data;
        const state = evolvePayout(initialPayout(), event);
        await tx.query(
          `INSERT INTO payouts (id, account_id, project_id, order_id, status, created_at, state, last_revision)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING`,
          [d.payoutId, d.accountId, d.projectId, d.orderId, state.status, d.createdAt, state, revision],
        );
        continue;
      }
      const state = await foldIntoRow<Payout>(tx, 'payouts', event.data.payoutId, recorded.revision, (s) => evolvePayout(s, event));
      if (!state) continue;
      await tx.query('UPDATE payouts SET status = $2, state = $3, last_revision = $4 WHERE id = $1', [event.data.payoutId, state.status, state, revision]);
    }
  },
};
