import { createHmac, timingSafeEqual } from 'node:crypto';
import { OPERATOR_SESSION_ID, OPERATOR_SESSION_LIFETIME_SECONDS } from '#payments/access';

/**
 * Headers of every console answer: a strict CSP (no script at all, styles and images
 * from the gateway only, forms posting to it only, never framed), no MIME sniffing,
 * no referrer, never cached.
 */
export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
};

export const SESSION_COOKIE = 'operator_session';

/**
 * The session cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's
 * page sends it), Path=/admin (the console only), Secure when the request came over
 * https (request.protocol, which follows X-Forwarded-Proto from TRUSTED_PROXIES only).
 */
export function sessionCookie(sessionId: string, secure: boolean): string {
  return `${SESSION_COOKIE}=${sessionId}; Path=/admin; Max-Age=${OPERATOR_SESSION_LIFETIME_SECONDS}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

/** Tells the browser to forget the cookie (logout). */
export function sessionCookieCleared(secure: boolean): string {
  return `${SESSION_COOKIE}=; Path=/admin; Max-Age=0; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

/** The session id of the Cookie header, if it carries a well-formed one. */
export function sessionIdOf(cookieHeader: string | undefined): string | null {
  if (cookieHeader === undefined) return null;
  for (const part of cookieHeader.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== SESSION_COOKIE) continue;
    const value = part.slice(eq + 1).trim();
    return OPERATOR_SESSION_ID.test(value) ? value : null;
  }
  return null;
}

/**
 * The session's form token, put in every form of its pages and checked on every POST:
 * an HMAC-SHA256 keyed with the session id (which only the operator's browser holds,
 * in an HttpOnly cookie; the database keeps only its hash), so it needs no storage
 * and dies with the session.
 */
export const formTokenOf = (sessionId: string): string => createHmac('sha256', sessionId).update('operator-console-form').digest('base64url');

/** A form token of some session (43 base64url characters), whichever: a stale page's token is one, a missing or made-up field is not. */
export const formTokenWellFormed = (given: string | undefined): boolean => given !== undefined && /^[A-Za-z0-9_-]{43}$/.test(given);

/** The form's token is the session's, compared in constant time. */
export function formTokenMatches(sessionId: string, given: string | undefined): boolean {
  if (given === undefined) return false;
  const expected = Buffer.from(formTokenOf(sessionId));
  const actual = Buffer.from(given);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}
