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

/**
 * The last item's seq and id a cursor of a list whose read model a rebuild renumbers
 * (invoices, payouts) carries: the query takes the seq that id has now, so that a
 * cursor handed out before `projections:rebuild` goes on where it stopped. An id that is
 * not `idPattern` is ignored (the seq alone, as a cursor without one).
 */
export function cursorAnchorOf(cursor: string | undefined, idPattern: RegExp): { seq: number; id: string | null } | null {
  if (cursor === undefined) return null;
  return parseCursor(cursor, (value) => {
    const seq = pageSeq(value);
    if (seq === null) return null;
    return { seq, id: typeof value.id === 'string' && idPattern.test(value.id) ? value.id : null };
  });
}

/** The `seq` a valid cursor carries, or null without one. */
export const cursorSeqOf = (cursor: string | undefined): number | null => (cursor === undefined ? null : parseCursor(cursor, pageSeq));
