import { randomUUID } from 'node:crypto';

/** The header a request id travels in, both ways. */
export const REQUEST_ID_HEADER = 'x-request-id';

/** What a client- or proxy-chosen request id may look like: a short token, safe to log and echo. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The id of one request: the caller's `X-Request-Id` when it is a sane token (at most
 * 128 characters of letters, digits and `._:-`, so a proxy's id ties its logs to ours),
 * otherwise a fresh UUID (a malformed or oversized header is never echoed or logged).
 */
export function requestIdOf(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  return value !== undefined && SANE_REQUEST_ID.test(value) ? value : randomUUID();
}
