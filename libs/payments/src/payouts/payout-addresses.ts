import type { Pool } from 'pg';
import { outcomeOf, writeStatement, type Migration } from '#platform/database';
import { canonicalPayoutAccount, PayoutMethod } from '#domain';

export const payoutAddressesMigration: Migration = {
  id: 'payments:0007_payout_addresses',
  sql: `
CREATE TABLE payout_addresses (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id),
  method text NOT NULL CHECK (method IN ('sbp', 'usdt_trc20', 'usdt_bep20')),
  account text NOT NULL,
  bank text,
  label text,
  status text NOT NULL CHECK (status IN ('unconfirmed', 'confirmed')),
  confirmed_at timestamptz,
  created_at timestamptz NOT NULL,
  UNIQUE (account_id, method, account)
);
`,
};

/** A detail is usable for payouts once confirmed (in the dashboard, by e-mail). */
export const PAYOUT_ADDRESS_STATUSES = ['unconfirmed', 'confirmed'] as const;
export type PayoutAddressStatus = (typeof PAYOUT_ADDRESS_STATUSES)[number];

export interface PayoutAddress {
  readonly id: number;
  readonly accountId: string;
  readonly method: PayoutMethod;
  /** Canonical and full; shown to merchants masked. */
  readonly account: string;
  readonly bank: string | null;
  readonly label: string | null;
  readonly status: PayoutAddressStatus;
  readonly confirmedAt: Date | null;
  readonly createdAt: Date;
}

interface Row {
  id: string;
  account_id: string;
  method: PayoutMethod;
  account: string;
  bank: string | null;
  label: string | null;
  status: PayoutAddressStatus;
  confirmed_at: Date | null;
  created_at: Date;
}

const toAddress = (r: Row): PayoutAddress => ({
  id: Number(r.id),
  accountId: r.account_id,
  method: r.method,
  account: r.account,
  bank: r.bank,
  label: r.label,
  status: r.status,
  confirmedAt: r.confirmed_at,
  createdAt: r.created_at,
});

/** The largest id a payout address can have and still be an integer in JSON. */
const MAX_ID = Number.MAX_SAFE_INTEGER;

/**
 * Payout details of merchant accounts: added and confirmed by the operator (the
 * confirmation stands in for the e-mail link), listed to merchants once confirmed.
 * One detail per account, method and canonical account: adding it again returns it,
 * marked `differs` when the existing one has another bank or label (nothing changes it).
 */
export class PayoutAddresses {
  constructor(private readonly pool: Pool) {}

  async add(
    accountId: string,
    detail: { method: PayoutMethod; account: string; bank: string | null; label: string | null },
    now: Date,
  ): Promise<{ address: PayoutAddress; created: boolean; differs: boolean }> {
    const account = canonicalPayoutAccount(detail.method, detail.account);
    if (account === null) throw new RangeError('not a payout account of this method');
    // Its answer lost: the detail looked up, and answered as found (as adding it again is).
    const inserted = await outcomeOf<{ row: Row | null }>(
      async () => {
        const written = await writeStatement<Row>(
          this.pool,
          `INSERT INTO payout_addresses (account_id, method, account, bank, label, status, created_at)
           VALUES ($1, $2, $3, $4, $5, 'unconfirmed', $6) ON CONFLICT (account_id, method, account) DO NOTHING RETURNING *`,
          [accountId, detail.method, account, detail.bank, detail.label, now],
        );
        return { row: written.rows[0] ?? null };
      },
      async () => {
        const found = await this.pool.query('SELECT 1 FROM payout_addresses WHERE account_id = $1 AND method = $2 AND account = $3', [
          accountId,
          detail.method,
          account,
        ]);
        return found.rowCount === 1 ? { row: null } : null;
      },
      'повторите запрос: добавление того же реквизита ответит им же',
    );
    if (inserted.row) return { address: toAddress(inserted.row), created: true, differs: false };
    const existing = await this.pool.query<Row>('SELECT * FROM payout_addresses WHERE account_id = $1 AND method = $2 AND account = $3', [
      accountId,
      detail.method,
      account,
    ]);
    const address = toAddress(existing.rows[0]!);
    return { address, created: false, differs: address.bank !== detail.bank || address.label !== detail.label };
  }

  /** Confirms the address (again: a no-op); null when there is none. */
  async confirm(id: number, now: Date): Promise<PayoutAddress | null> {
    if (!Number.isSafeInteger(id) || id < 1 || id > MAX_ID) return null;
    // Its answer lost: confirmed now is what a repeat (a no-op) would answer; not confirmed, nothing was written.
    const r = await outcomeOf(
      () =>
        writeStatement<Row>(
          this.pool,
          `UPDATE payout_addresses SET status = 'confirmed', confirmed_at = COALESCE(confirmed_at, $2) WHERE id = $1 RETURNING *`,
          [id, now],
        ),
      async () => {
        const found = await this.pool.query<Row>(`SELECT * FROM payout_addresses WHERE id = $1 AND status = 'confirmed'`, [id]);
        return found.rowCount === 0 ? null : found;
      },
      'повторите запрос: подтверждение подтверждённого реквизита ответит им же',
    );
    return r.rows[0] ? toAddress(r.rows[0]) : null;
  }

  async byId(accountId: string, id: number): Promise<PayoutAddress | null> {
    if (!Number.isSafeInteger(id) || id < 1) return null;
    const r = await this.pool.query<Row>('SELECT * FROM payout_addresses WHERE id = $1 AND account_id = $2', [id, accountId]);
    return r.rows[0] ? toAddress(r.rows[0]) : null;
  }

  /** The account's detail with this method and account (spelled any accepted way), or null. */
  async byAccount(accountId: string, method: PayoutMethod, account: string): Promise<PayoutAddress | null> {
    const canonical = canonicalPayoutAccount(method, account);
    if (canonical === null) return null;
    const r = await this.pool.query<Row>('SELECT * FROM payout_addresses WHERE account_id = $1 AND method = $2 AND account = $3', [
      accountId,
      method,
      canonical,
    ]);
    return r.rows[0] ? toAddress(r.rows[0]) : null;
  }

  async confirmedOf(accountId: string): Promise<PayoutAddress[]> {
    const r = await this.pool.query<Row>(`SELECT * FROM payout_addresses WHERE account_id = $1 AND status = 'confirmed' ORDER BY id`, [accountId]);
    return r.rows.map(toAddress);
  }
}
