import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The payment page's form tokens. Every rendering of an invoice's page puts a fresh
 * token in its forms: `<issued at, unix seconds>.<random nonce>.<HMAC-SHA256 over the
 * invoice id, the time and the nonce>`, keyed with a key derived from the secrets key
 * (so every API process of one gateway agrees, and a key rotation keeps older tokens
 * valid while the old key is held). A POST of the page is accepted with a token of
 * that invoice no older than a day (an invoice lives at most 24 hours) — or with an
 * Origin (or, without one, a Referer) that is the gateway itself.
 */
export const FORM_TOKEN_FIELD = 'formToken';
export const FORM_TOKEN_MAX_AGE_SECONDS = 24 * 60 * 60;
/** A token stamped this much after "now" is still accepted (clocks of two API processes). */
const FUTURE_SLACK_SECONDS = 60;

const mac = (key: Buffer, invoiceId: string, issuedAt: string, nonce: string): Buffer =>
  createHmac('sha256', key).update(`payment-page-form|${invoiceId.toLowerCase()}|${issuedAt}|${nonce}`).digest();

export class PageFormTokens {
  /** `keys()`: the current key first (read at each use, so a rotated key file is followed). */
  constructor(private readonly keys: () => readonly Buffer[]) {}

  issue(invoiceId: string, now: Date): string {
    const issuedAt = String(Math.floor(now.getTime() / 1000));
    const nonce = randomBytes(12).toString('base64url');
    return `${issuedAt}.${nonce}.${mac(this.keys()[0]!, invoiceId, issuedAt, nonce).toString('base64url')}`;
  }

  /** The token was issued for this invoice by this gateway, within a day of `now`. */
  verify(invoiceId: string, token: string | undefined, now: Date): boolean {
    if (token === undefined) return false;
    const match = /^(\d{1,12})\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{43})$/.exec(token);
    if (!match) return false;
    const [, issuedAt, nonce, given] = match as unknown as [string, string, string, string];
    const age = Math.floor(now.getTime() / 1000) - Number(issuedAt);
    if (age > FORM_TOKEN_MAX_AGE_SECONDS || age < -FUTURE_SLACK_SECONDS) return false;
    const givenMac = Buffer.from(given, 'base64url');
    return this.keys().some((key) => {
      const expected = mac(key, invoiceId, issuedAt, nonce);
      return expected.length === givenMac.length && timingSafeEqual(expected, givenMac);
    });
  }
}

/**
 * The request comes from a page of the gateway itself: its Origin (or, when a browser
 * sent none, its Referer) is the public URL's origin or the origin of the Host it was
 * sent to, under the scheme it came with (`protocol`: X-Forwarded-Proto only from
 * TRUSTED_PROXIES), so a page on the plain-http origin of an https gateway is another
 * site. `Origin: null` (what a browser sends under `Referrer-Policy: no-referrer`, as
 * on the payment page) is not an origin: such a POST needs its form token.
 */
export function fromGatewayItself(headers: Readonly<Record<string, string | string[] | undefined>>, protocol: string, publicUrl: string): boolean {
  const one = (name: string) => {
    const value = headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const host = one('host');
  const allowed = new Set<string>([originOf(publicUrl)].filter((o): o is string => o !== null));
  const hostOrigin = host ? originOf(`${protocol}://${host}`) : null;
  if (hostOrigin) allowed.add(hostOrigin);
  const origin = one('origin');
  if (origin !== undefined) return origin !== 'null' && allowed.has(origin.toLowerCase());
  const referer = one('referer');
  if (referer === undefined) return false;
  const refererOrigin = originOf(referer);
  return refererOrigin !== null && allowed.has(refererOrigin);
}

function originOf(url: string): string | null {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.origin.toLowerCase() : null;
  } catch {
    return null;
  }
}
