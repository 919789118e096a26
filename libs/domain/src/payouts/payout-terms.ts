/**
 * What a payout costs and where it may go: the payout methods, their fees and
 * minimums, the payout details (phone or wallet) in their one canonical spelling and
 * masked for display, and the USDT amount at a rate.
 */
import { createHash } from 'node:crypto';
import { Kopecks, percentOf, PercentRate } from '#ledger';

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
 * - sbp: a Russian mobile number, +7 and ten digits (spaces, dashes, brackets and a
 *   leading 8 are accepted and normalised);
 * - usdt_trc20: a TRON address, T and 33 base58 characters (case matters) whose
 *   checksum holds, so that a mistyped character is refused before money is sent to it;
 * - usdt_bep20: 0x and 40 hex digits (case does not matter: kept in lower case).
 */
export function canonicalPayoutAccount(method: PayoutMethod, account: string): string | null {
  const text = account.trim();
  switch (method) {
    case 'sbp': {
      const digits = text.replace(/[\s()-]/g, '');
      const m = /^(?:\+7|8|7)(\d{10})$/.exec(digits);
      return m ? `+7${m[1]}` : null;
    }
    case 'usdt_trc20':
      return /^T[1-9A-HJ-NP-Za-km-z]{33}$/.test(text) && isTronAddress(text) ? text : null;
    case 'usdt_bep20':
      return /^0x[0-9a-fA-F]{40}$/.test(text) ? text.toLowerCase() : null;
  }
}

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const TRON_PREFIX = 0x41;

/**
 * Base58Check as TRON writes addresses: 25 bytes, the prefix 0x41, a 20-byte account
 * and the first 4 bytes of the double SHA-256 of the 21 before them. Hand-written: the
 * whole of it is these lines, and no base58 library is a dependency of the gateway.
 */
const tronChecksum = (payload: Buffer): Buffer => {
  const sha256 = (data: Buffer) => createHash('sha256').update(data).digest();
  return sha256(sha256(payload)).subarray(0, 4);
};

function isTronAddress(text: string): boolean {
  let value = 0n;
  for (const c of text) value = value * 58n + BigInt(BASE58.indexOf(c));
  const hex = value.toString(16).padStart(50, '0');
  if (hex.length !== 50) return false;
  const bytes = Buffer.from(hex, 'hex');
  return bytes[0] === TRON_PREFIX && tronChecksum(bytes.subarray(0, 21)).equals(bytes.subarray(21));
}

/** The TRON address of a 20-byte account (what the seed and the tests make addresses with). */
export function tronAddressOf(account: Uint8Array): string {
  if (account.length !== 20) throw new RangeError(`a TRON account is 20 bytes, got ${account.length}`);
  const payload = Buffer.concat([Buffer.from([TRON_PREFIX]), account]);
  let value = BigInt(`0x${Buffer.concat([payload, tronChecksum(payload)]).toString('hex')}`);
  let text = '';
  for (; value > 0n; value /= 58n) text = BASE58[Number(value % 58n)] + text;
  return text;
}

/** For display: a phone keeps its code and last two digits, a wallet its first six and last four characters. */
export function maskPayoutAccount(method: PayoutMethod, account: string): string {
  if (method === 'sbp') return `${account.slice(0, 5)}*****${account.slice(-2)}`;
  return `${account.slice(0, 6)}****${account.slice(-4)}`;
}
