/** Opaque page cursors: base64url JSON, validated on the way back in. */
export const encodeCursor = (value: Record<string, unknown>): string => Buffer.from(JSON.stringify(value)).toString('base64url');

/**
 * The `seq` of a page cursor: the position of the last item of the page in its read
 * model (a bigint column). Only a safe non-negative integer is one; anything else
 * (1.5, 1e308, -1, 2^53 + 1, a string) is refused here, before any query sees it.
 */
export const pageSeq = (value: Record<string, unknown>): number | null =>
  typeof value.seq === 'number' && Number.isSafeInteger(value.seq) && value.seq >= 0 ? value.seq : null;

export function parseCursor<T>(cursor: string, read: (value: Record<string, unknown>) => T | null): T | null {
  let decoded: unknown = null;
  if (/^[A-Za-z0-9_-]{1,512}$/.test(cursor)) {
    try {
      decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    } catch {
      decoded = null;
    }
  }
  return decoded && typeof decoded === 'object' && !Array.isArray(decoded) ? read(decoded as Record<string, unknown>) : null;
}

/** The page size of a valid query (its default when absent). */
export const pageSizeOf = (limit: string | undefined, fallback: number): number => (limit === undefined ? fallback : Number(limit));

/** The `seq` a valid cursor carries, or null without one. */
export const cursorSeqOf = (cursor: string | undefined): number | null => (cursor === undefined ? null : parseCursor(cursor, pageSeq));
