import { createHash } from 'node:crypto';
import { LedgerMode } from './ledger';

/** One ledger per merchant account and mode. */
export interface LedgerId {
  readonly accountId: string;
  readonly mode: LedgerMode;
}

export const LEDGER_CATEGORY = 'ledger';

export const ledgerStreamName = (id: LedgerId): string => `${LEDGER_CATEGORY}-${id.mode}_${id.accountId}`;

export function ledgerIdFromStream(streamName: string): LedgerId | null {
  const match = /^ledger-(test|live)_(.+)$/.exec(streamName);
  return match ? { mode: match[1] as LedgerMode, accountId: match[2]! } : null;
}

/** RFC 4122 name-based UUID (version 5, SHA-1) in a namespace of our own. */
const NAMESPACE = Buffer.from('6f1c2a8e9d3b4c5a8e7f0a1b2c3d4e5f', 'hex');

/**
 * The id of the journal entry a cause posts in a ledger: the same cause always
 * gives the same id, and the event store never stores one event id twice, so a
 * cause older than the ledger's window of recent causes still cannot post twice.
 */
export function ledgerEntryId(ledger: LedgerId, cause: string): string {
  const hash = createHash('sha1').update(NAMESPACE).update(`${ledgerStreamName(ledger)}|${cause}`).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
