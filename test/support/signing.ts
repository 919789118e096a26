/**
 * Mode 2 of the spec (HMAC request signing) as a merchant implements it, written
 * from the spec alone: hex HMAC-SHA256 over `<X-Timestamp>.<exact raw body>` keyed
 * with the project's webhook secret, sent with X-Public-Id, X-Timestamp and
 * X-Signature (or Signature). Plus the gateway clock as the tests need it.
 */
import { createHmac } from 'node:crypto';
import type { Json, Operator, Reply } from './merchant-fixtures';

/** hex HMAC-SHA256 of `<timestamp>.<rawBody>` keyed with `secret`. */
export function signRequest(secret: string, timestamp: string | number, rawBody: string | Buffer = ''): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

export interface SignedRequest {
  readonly method: string;
  readonly path: string;
  /** The exact bytes sent and signed (unless `signedBody` says otherwise). */
  readonly body?: string;
  readonly publicId?: string;
  readonly secret: string;
  /** X-Timestamp as sent (and signed); a number is sent as its decimal text. */
  readonly timestamp?: string | number;
  /** What was signed instead of `body` (to send one body and sign another). */
  readonly signedBody?: string;
  /** The signature to send instead of the computed one. */
  readonly signature?: string;
  /** Which header carries the signature (default X-Signature). */
  readonly signatureHeader?: 'x-signature' | 'signature';
  /** Leave these headers out. */
  readonly omit?: readonly ('x-public-id' | 'x-timestamp' | 'signature')[];
  readonly contentType?: string;
  readonly extraHeaders?: Record<string, string>;
}

/** The headers of a signed request (and the signature computed). */
export function signedHeaders(r: SignedRequest): { headers: Record<string, string>; signature: string } {
  const timestamp = r.timestamp === undefined ? String(Math.floor(Date.now() / 1000)) : String(r.timestamp);
  const signature = r.signature ?? signRequest(r.secret, timestamp, r.signedBody ?? r.body ?? '');
  const omit = new Set(r.omit ?? []);
  const headers: Record<string, string> = { ...(r.extraHeaders ?? {}) };
  if (!omit.has('x-public-id') && r.publicId !== undefined) headers['x-public-id'] = r.publicId;
  if (!omit.has('x-timestamp')) headers['x-timestamp'] = timestamp;
  if (!omit.has('signature')) headers[r.signatureHeader ?? 'x-signature'] = signature;
  if (r.body !== undefined) headers['content-type'] = r.contentType ?? 'application/json';
  return { headers, signature };
}

/** Sends a signed request to `baseUrl`; the reply with the body parsed when it is JSON. */
export async function sendSigned(baseUrl: string, r: SignedRequest): Promise<Reply & { signature: string }> {
  const { headers, signature } = signedHeaders(r);
  const reply = await sendRaw(baseUrl, r.method, r.path, { headers, body: r.body });
  return { ...reply, signature };
}

/** One HTTP request with the body sent verbatim; JSON answers parsed. */
export async function sendRaw(
  baseUrl: string,
  method: string,
  path: string,
  init: { headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<Reply> {
  const response = await fetch(`${baseUrl}${path}`, { method, headers: init.headers ?? {}, body: init.body });
  const text = await response.text();
  let body: Json = text;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: response.status, body, headers: response.headers };
}

/**
 * The gateway clock seen from the test process. CLOCK=manual is real time plus an
 * offset of whole seconds (advanced in whole seconds only), so the gateway's second
 * boundaries are the test process's; `nowMs()` is the gateway time to the
 * millisecond, without a request.
 */
export class GatewayClock {
  private constructor(private offsetMs: number) {}

  /** Reads the offset with `POST /admin/v1/clock/advance {seconds: 0}` (CLOCK=manual). */
  static async read(operator: Operator): Promise<GatewayClock> {
    const clock = new GatewayClock(0);
    await clock.sync(operator);
    return clock;
  }

  /** The system clock (CLOCK=system): no offset. */
  static system(): GatewayClock {
    return new GatewayClock(0);
  }

  /** Re-reads the offset (after an advance), and makes that process pick it up now. */
  async sync(operator: Operator): Promise<void> {
    const now = await operator.advance(0);
    this.offsetMs = Math.round((now.getTime() - Date.now()) / 1000) * 1000;
  }

  /** Advances the gateway clock through `operator` and follows it. */
  async advance(operator: Operator, seconds: number): Promise<void> {
    await operator.advance(seconds);
    await this.sync(operator);
  }

  nowMs(): number {
    return Date.now() + this.offsetMs;
  }

  /** The gateway time in whole unix seconds. */
  nowSeconds(): number {
    return Math.floor(this.nowMs() / 1000);
  }

  /** Waits until the gateway clock is between `fromMs` and `toMs` past a whole second. */
  async phase(fromMs: number, toMs: number): Promise<void> {
    for (;;) {
      const ms = this.nowMs() % 1000;
      if (ms >= fromMs && ms < toMs) return;
      const wait = ms < fromMs ? fromMs - ms : 1000 - ms + fromMs;
      await new Promise((resolve) => setTimeout(resolve, Math.max(1, wait)));
    }
  }
}
