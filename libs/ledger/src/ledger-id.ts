import { uuidV5 } from './uuid-v5';
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

/** The namespace of ledger entry ids (UUID v5). */
const NAMESPACE = Buffer.from('6f1c2a8e9d3b4c5a8e7f0a1b2c3d4e5f', 'hex');

/**
 * The id of the journal entry a cause posts in a ledger: the same cause always
 * gives the same id, and the event store never stores one event id twice, so a
 * cause older than the ledger's window of recent causes still cannot post twice.
 */
export function ledgerEntryId(ledger: LedgerId, cause: string): string {
  return uuidV5(NAMESPACE, `${ledgerStreamName(ledger)}|${cause}`);
}
