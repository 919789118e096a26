import { ApiError } from '../errors/api-error';

/** Opaque page cursors: base64url JSON, validated on the way back in. */
export const encodeCursor = (value: Record<string, unknown>): string => Buffer.from(JSON.stringify(value)).toString('base64url');

export function decodeCursor<T>(cursor: string, read: (value: Record<string, unknown>) => T | null): T {
  let decoded: unknown = null;
  if (/^[A-Za-z0-9_-]{1,512}$/.test(cursor)) {
    try {
      decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    } catch {
      decoded = null;
    }
  }
  const value = decoded && typeof decoded === 'object' && !Array.isArray(decoded) ? read(decoded as Record<string, unknown>) : null;
  if (value === null) {
    throw ApiError.validation([{ param: 'cursor', code: 'invalid_cursor', message: 'cursor: передайте nextCursor из предыдущего ответа' }]);
  }
  return value;
}
