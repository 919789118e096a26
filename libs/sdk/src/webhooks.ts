import { createHmac } from 'node:crypto';
import { types } from 'node:util';
import { WebhookVerificationError } from './errors';
import { hexDigestsEqual } from './signing';
import type { WebhookEvent } from './types';

/** Node's `req.headers` (IncomingHttpHeaders), a fetch `Headers`, or any record of header names (any case) to values. */
export type WebhookHeaders = { get(name: string): string | null } | Readonly<Record<string, string | readonly string[] | undefined>>;

export interface VerifyWebhookOptions {
  /** How far the timestamped signature's `t` may be from now, in seconds (default 300; not a finite number ≥ 0: a TypeError). */
  readonly toleranceSeconds?: number | undefined;
  /**
   * Refuse a delivery without X-Service-Signature-Timestamped (default true: a replayed
   * delivery is refused). false accepts the spec's plain signature alone (checked when present).
   */
  readonly requireTimestamp?: boolean | undefined;
  /** A function answering the receiver's clock in ms (default Date.now; not a function, or an answer not a finite number: a TypeError). */
  readonly now?: (() => number) | undefined;
  /**
   * The mode the receiver serves: test and live deliveries of a project share its URL and secret, and anyone with the
   * test key can pay a test invoice (of any orderId) in the sandbox. Given, a delivery of the other mode is refused
   * (`mode_mismatch`); not given, both are returned (`isTest` tells them apart).
   */
  readonly mode?: 'live' | 'test' | undefined;
}

export const SIGNATURE_HEADER = 'x-service-signature';
export const TIMESTAMPED_SIGNATURE_HEADER = 'x-service-signature-timestamped';
export const DEFAULT_TOLERANCE_SECONDS = 300;

function headerOf(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  for (const [key, value] of Object.entries(headers as Readonly<Record<string, string | readonly string[] | undefined>>)) {
    if (key.toLowerCase() !== name) continue;
    if (value === undefined) return undefined;
    // A header sent twice is not a signature.
    if (typeof value !== 'string') return value.length === 1 ? value[0] : undefined;
    return value;
  }
  return undefined;
}

const hmacHex = (secret: string, ...parts: (string | Uint8Array)[]): string => {
  const mac = createHmac('sha256', secret);
  for (const part of parts) mac.update(part);
  return mac.digest('hex');
};

/**
 * The body's bytes: a string, any view of bytes (a Buffer or Uint8Array, a DataView or another typed array, taken
 * as its bytes) or an ArrayBuffer or SharedArrayBuffer, from this realm or another (node:vm, a worker's): told by
 * node:util's types and ArrayBuffer.isView, not instanceof. Anything else (Express's parsed req.body, undefined when
 * no body was read) is refused as a verification failure, so a receiver's 400 path takes it, with what it got and
 * what to pass instead.
 */
function rawBytesOf(rawBody: unknown): Uint8Array {
  // Always a private copy: the signature checks and the parse must read the same bytes, also when the caller's memory
  // changes meanwhile (a SharedArrayBuffer another thread writes).
  if (typeof rawBody === 'string') return Buffer.from(rawBody, 'utf8');
  if (types.isUint8Array(rawBody)) return Buffer.from(rawBody);
  if (ArrayBuffer.isView(rawBody)) return Buffer.from(new Uint8Array(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength));
  if (types.isAnyArrayBuffer(rawBody)) return Buffer.from(new Uint8Array(rawBody));
  throw new WebhookVerificationError(
    'raw_body_required',
    `verifyWebhook: rawBody must be the exact bytes received (a Buffer, Uint8Array, ArrayBuffer or string), got ${kindOf(rawBody)}. ` +
      "Express: express.raw({ type: 'application/json' }) on the route, then req.body; Fastify: " +
      "addContentTypeParser('application/json', { parseAs: 'buffer' }, …); Next.js: await request.text(); node:http: the request's chunks, Buffer.concat",
  );
}

/** What a refused rawBody is: a plain object is named as what it likely is, any other by its class (a Blob, a Map). */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value !== 'object') return typeof value;
  const proto = Object.getPrototypeOf(value) as object | null;
  // Object.prototype of any realm: its own prototype is null.
  if (proto === null || Object.getPrototypeOf(proto) === null) return 'an object (a parsed JSON body?)';
  const name = (proto as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' ? `an object of class ${name}` : 'an object';
}

/**
 * Verifies a webhook delivery and returns its event:
 * - `X-Service-Signature` (the spec's): `sha256=` and the hex HMAC-SHA256 of the raw body,
 *   keyed with the project's webhook secret, compared in constant time;
 * - `X-Service-Signature-Timestamped` (optional with `requireTimestamp: false`):
 *   `t=<unix seconds>,v2=<hex>` over `webhook.<t>.<raw body>`, and `t` within `toleranceSeconds` of
 *   now, so an old delivery sent again is refused.
 * `rawBody` must be the exact bytes received (not JSON re-serialised). Throws
 * WebhookVerificationError (code signature_missing, signature_invalid, timestamp_invalid,
 * payload_invalid, raw_body_required, mode_mismatch).
 */
export function verifyWebhook(
  rawBody: string | ArrayBufferView | ArrayBufferLike,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): WebhookEvent {
  if (typeof secret !== 'string' || secret === '') throw new TypeError('verifyWebhook: the webhook secret is empty');
  // NaN (Number of an unset variable) would pass every delivery: a comparison with it is false.
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (typeof tolerance !== 'number' || !Number.isFinite(tolerance) || tolerance < 0)
    throw new TypeError(`verifyWebhook: toleranceSeconds must be a finite number of seconds from 0, got ${String(tolerance)}`);
  if (options.now !== undefined && typeof options.now !== 'function')
    throw new TypeError(`verifyWebhook: now must be a function answering the clock in ms (as Date.now), got ${typeof options.now}`);
  if (options.mode !== undefined && options.mode !== 'live' && options.mode !== 'test')
    throw new TypeError(`verifyWebhook: mode must be 'live' or 'test', got ${String(options.mode)}`);
  const body = rawBytesOf(rawBody);

  // Node's req.headers and fetch's Headers join a header sent twice with ", ": a comma is in no
  // single X-Service-Signature, and a second t= in no single timestamped one.
  const signature = headerOf(headers, SIGNATURE_HEADER);
  if (signature === undefined || signature.includes(','))
    throw new WebhookVerificationError('signature_missing', 'X-Service-Signature is missing or sent twice');
  const given = /^sha256=([0-9a-f]{64})$/i.exec(signature.trim());
  if (!given || !hexDigestsEqual(hmacHex(secret, body), given[1]!)) {
    throw new WebhookVerificationError('signature_invalid', 'X-Service-Signature does not match the body and the secret');
  }

  const timestamped = headerOf(headers, TIMESTAMPED_SIGNATURE_HEADER);
  if (timestamped === undefined) {
    if (options.requireTimestamp ?? true) throw new WebhookVerificationError('signature_missing', 'X-Service-Signature-Timestamped is missing');
  } else {
    const fields = new Map<string, string[]>();
    for (const part of timestamped.split(',')) {
      const eq = part.indexOf('=');
      if (eq <= 0) continue;
      const key = part.slice(0, eq).trim();
      fields.set(key, [...(fields.get(key) ?? []), part.slice(eq + 1).trim()]);
    }
    const t = fields.get('t');
    if (t !== undefined && t.length > 1) throw new WebhookVerificationError('signature_missing', 'X-Service-Signature-Timestamped is sent twice');
    const v2 = fields.get('v2') ?? [];
    if (t === undefined || t.length !== 1 || !/^\d{1,12}$/.test(t[0]!) || v2.length === 0) {
      throw new WebhookVerificationError('signature_invalid', 'X-Service-Signature-Timestamped is not t=<unix seconds>,v2=<hex>');
    }
    // `webhook.` first: apart from the API's HMAC credential over `<X-Timestamp>.<body>` with the same secret.
    const expected = hmacHex(secret, `webhook.${t[0]}.`, body);
    // Every v2 is compared (no early exit on a match), each in constant time.
    const matches = v2.map((candidate) => hexDigestsEqual(expected, candidate)).some(Boolean);
    if (!matches)
      throw new WebhookVerificationError('signature_invalid', 'X-Service-Signature-Timestamped does not match the timestamp, the body and the secret');
    const nowMs: unknown = (options.now ?? Date.now)();
    // NaN (a now that forgot its return, or answers a Date or a string) would pass every timestamp.
    if (typeof nowMs !== 'number' || !Number.isFinite(nowMs))
      throw new TypeError(`verifyWebhook: now() must answer the clock in ms (a finite number, as Date.now), got ${String(nowMs)}`);
    const nowSeconds = Math.floor(nowMs / 1000);
    if (Math.abs(nowSeconds - Number(t[0])) > tolerance) {
      throw new WebhookVerificationError('timestamp_invalid', `the delivery's timestamp ${t[0]} is more than ${tolerance} s from now (${nowSeconds})`);
    }
  }

  let event: unknown;
  try {
    event = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    throw new WebhookVerificationError('payload_invalid', 'the body is not JSON');
  }
  const e = event as Partial<WebhookEvent> | null;
  if (typeof e !== 'object' || e === null || typeof e.id !== 'string' || typeof e.type !== 'string' || typeof e.data !== 'object') {
    throw new WebhookVerificationError('payload_invalid', 'the body is not a webhook event {id, type, createdAt, isTest, data}');
  }
  if (options.mode !== undefined && e.isTest !== (options.mode === 'test')) {
    throw new WebhookVerificationError('mode_mismatch', `a ${e.isTest === true ? 'test' : 'live'} delivery, and this receiver serves ${options.mode} ones`);
  }
  return event as WebhookEvent;
}
