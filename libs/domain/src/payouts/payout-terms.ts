/**
 * What a payout costs and where it may go: the payout methods, their fees and
 * minimums, the payout details (phone or wallet) in their one canonical spelling and
 * masked for display, and the USDT amount at a rate.
 */
import { Kopecks, percentOf, PercentRate } from '#ledger';
import { isBscAddress, isTronAddress } from './wallet-addresses';

export const PAYOUT_METHODS = ['sbp', 'usdt_trc20', 'usdt_bep20'] as const;
export type PayoutMethod = (typeof PAYOUT_METHODS)[number];

export interface PayoutTerms {
  /** The gateway's fee, kept out of the amount: netAmount = amount − fee. */
  readonly feePct: PercentRate;
  /** The smallest payout (below: 422 amount_out_of_range). */
  readonly min: Kopecks;
}

/**
 * Documented defaults (configurable with PAYOUT_TERMS): SBP 1.00 %, USDT TRC-20
 * 2.00 %, USDT BEP-20 1.50 %; minimum 100.00 for each.
 */
export const DEFAULT_PAYOUT_TERMS: Readonly<Record<PayoutMethod, PayoutTerms>> = {
  sbp: { feePct: 10_000, min: 10_000 },
  usdt_trc20: { feePct: 20_000, min: 10_000 },
  usdt_bep20: { feePct: 15_000, min: 10_000 },
};

export const isUsdtMethod = (method: PayoutMethod): boolean => method !== 'sbp';

export interface PayoutAmounts {
  readonly amount: Kopecks;
  readonly feeAmount: Kopecks;
  readonly netAmount: Kopecks;
}

/** The fee, half-up to the kopeck, and what reaches the recipient. */
export function payoutAmounts(amount: Kopecks, terms: PayoutTerms): PayoutAmounts {
  const feeAmount = Math.min(percentOf(amount, terms.feePct), amount);
  return { amount, feeAmount, netAmount: amount - feeAmount };
}

/** USDT has six decimals: the amount is in millionths of a USDT. */
const MICRO = 1_000_000n;

/**
 * The USDT to send for `netAmount` rubles at `rate` (kopecks per 1 USDT), rounded
 * down to a millionth (never more than the rubles buy), as a decimal string.
 */
export function usdtFor(netAmount: Kopecks, rate: Kopecks): string {
  if (!Number.isSafeInteger(rate) || rate <= 0) throw new RangeError(`USDT rate must be a positive number of kopecks, got ${rate}`);
  const micro = (BigInt(netAmount) * MICRO) / BigInt(rate);
  const whole = micro / MICRO;
  const fraction = (micro % MICRO).toString().padStart(6, '0');
  return `${whole}.${fraction}`;
}

/**
 * The canonical spelling of a payout detail, or null when it is not one:
 * - sbp: a Russian mobile number, +7 9 and nine digits: SBP finds the payee by the
 *   mobile number their bank holds, so a landline (+7 495 …) or a Kazakh number
 *   (+7 7…) reaches nobody (spaces, dashes, brackets and a leading 8 are accepted and
 *   normalised);
 * - usdt_trc20: a TRON address, T and 33 base58 characters (case matters) whose
 *   checksum holds, so that a mistyped character is refused before money is sent to it;
 * - usdt_bep20: 0x and 40 hex digits, kept in lower case; written in mixed case, the
 *   case must be its EIP-55 checksum (all lower or all upper case carries none).
 */
export function canonicalPayoutAccount(method: PayoutMethod, account: string): string | null {
  const text = account.trim();
  switch (method) {
    case 'sbp': {
      const digits = text.replace(/[\s()-]/g, '');
      const m = /^(?:\+7|8|7)(9\d{9})$/.exec(digits);
      return m ? `+7${m[1]}` : null;
    }
    case 'usdt_trc20':
      return isTronAddress(text) ? text : null;
    case 'usdt_bep20':
      return isBscAddress(text) ? text.toLowerCase() : null;
  }
}

/** For display: a phone keeps its code and last two digits, a wallet its first six and last four characters. */
export function maskPayoutAccount(method: PayoutMethod, account: string): string {
  if (method === 'sbp') return `${account.slice(0, 5)}*****${account.slice(-2)}`;
  return `${account.slice(0, 6)}****${account.slice(-4)}`;
}
