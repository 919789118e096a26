/**
 * verifyWebhook without a gateway: the comparison is constant-time
 * (crypto.timingSafeEqual, after a length check, never an early-exit string compare),
 * the headers come in any of Node's, fetch's or a plain record's shapes, a signed body
 * that is not an event is refused, and so is a tolerance that is not a number. The real
 * deliveries are in sdk-gateway.spec.ts.
 */
import { createHmac } from 'node:crypto';
import vm from 'node:vm';
import { verifyWebhook, WebhookVerificationError } from '../../libs/sdk/src';

// The module object itself (not an import wrapper), so the spy sees the SDK's calls.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const nodeCrypto = require('node:crypto') as typeof import('node:crypto');

const SECRET = 'whsec_test_secret';
const T = 1_800_000_000;
const BODY = JSON.stringify({ id: 'evt-1', type: 'invoice.paid', createdAt: '2027-01-15T08:00:00.000Z', isTest: true, data: { invoice: { id: 'x' } } });
const mac = (text: string, secret = SECRET) => createHmac('sha256', secret).update(text).digest('hex');
const headersOf = (body: string, t = T) => ({
  'x-service-signature': `sha256=${mac(body)}`,
  'x-service-signature-timestamped': `t=${t},v2=${mac(`webhook.${t}.${body}`)}`,
  'x-service-timestamp': String(t),
});
const now = () => T * 1000;

function codeOf(f: () => unknown): string {
  try {
    f();
  } catch (error) {
    expect(error).toBeInstanceOf(WebhookVerificationError);
    return (error as WebhookVerificationError).code;
  }
  return 'accepted';
}

describe('verifyWebhook', () => {
  afterEach(() => jest.restoreAllMocks());

  it('compares both signatures with crypto.timingSafeEqual on equal-length buffers', () => {
    const spy = jest.spyOn(nodeCrypto, 'timingSafeEqual');
    expect(verifyWebhook(BODY, headersOf(BODY), SECRET, { now }).id).toBe('evt-1');
    expect(spy).toHaveBeenCalledTimes(2);
    for (const [a, b] of spy.mock.calls) expect([(a as Buffer).length, (b as Buffer).length]).toEqual([32, 32]);
  });

  it('a signature of another length is refused before the comparison (timingSafeEqual would throw on it)', () => {
    const spy = jest.spyOn(nodeCrypto, 'timingSafeEqual');
    const short = { ...headersOf(BODY), 'x-service-signature': `sha256=${mac(BODY).slice(0, 62)}` };
    expect(codeOf(() => verifyWebhook(BODY, short, SECRET, { now }))).toBe('signature_invalid');
    const long = { ...headersOf(BODY), 'x-service-signature-timestamped': `t=${T},v2=${mac(`webhook.${T}.${BODY}`)}00` };
    expect(codeOf(() => verifyWebhook(BODY, long, SECRET, { now }))).toBe('signature_invalid');
    expect(spy).toHaveBeenCalledTimes(1); // only the first (valid-length) X-Service-Signature of `long`
  });

  it('takes Node headers in any case, fetch Headers, and raw bytes', () => {
    const upper = Object.fromEntries(Object.entries(headersOf(BODY)).map(([k, v]) => [k.toUpperCase(), v]));
    expect(verifyWebhook(BODY, upper, SECRET, { now }).type).toBe('invoice.paid');
    expect(verifyWebhook(Buffer.from(BODY), new Headers(headersOf(BODY)), SECRET, { now }).type).toBe('invoice.paid');
    expect(verifyWebhook(new Uint8Array(Buffer.from(BODY)), headersOf(BODY), SECRET, { now }).type).toBe('invoice.paid');
    // A header sent twice is no signature: as a list, and as Node's req.headers and fetch's Headers join it (", ").
    expect(codeOf(() => verifyWebhook(BODY, { ...headersOf(BODY), 'x-service-signature': [`sha256=${mac(BODY)}`, 'sha256=00'] }, SECRET, { now }))).toBe(
      'signature_missing',
    );
    for (const name of ['x-service-signature', 'x-service-signature-timestamped'] as const) {
      const once = headersOf(BODY)[name];
      const joined = { ...headersOf(BODY), [name]: `${once}, ${once}` };
      expect({ name, code: codeOf(() => verifyWebhook(BODY, joined, SECRET, { now })) }).toEqual({ name, code: 'signature_missing' });
      const fetched = new Headers(headersOf(BODY));
      fetched.append(name, once);
      expect({ name, code: codeOf(() => verifyWebhook(BODY, fetched, SECRET, { now })) }).toEqual({ name, code: 'signature_missing' });
    }
  });

  it("a body that is not the raw bytes (express.json's parsed object, undefined) is a WebhookVerificationError saying what to pass; an ArrayBuffer verifies", () => {
    const bytes = Buffer.from(BODY);
    const arrayBuffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    expect(verifyWebhook(arrayBuffer, headersOf(BODY), SECRET, { now }).id).toBe('evt-1');
    // What a receiver gets from `req.body` when a JSON parser ran first, or when nothing read the body.
    for (const parsed of [JSON.parse(BODY) as unknown, undefined, null, [1], 42]) {
      const refusal = (() => {
        try {
          verifyWebhook(parsed as string, headersOf(BODY), SECRET, { now });
        } catch (error) {
          return error;
        }
      })();
      expect(refusal).toBeInstanceOf(WebhookVerificationError);
      expect(refusal).toMatchObject({ code: 'raw_body_required' });
      const { message } = refusal as WebhookVerificationError;
      expect(message).toContain('rawBody must be the exact bytes received');
      expect(message).toContain("express.raw({ type: 'application/json' })");
      expect(message).toContain('await request.text()');
    }
  });

  it('bytes from another realm (node:vm), a DataView, another typed array or a SharedArrayBuffer verify; a refusal names what it got', () => {
    const bytes = Buffer.from(BODY);
    // A copy with the body at offset 17 of a larger store: a view is taken as its own bytes, not its whole buffer.
    const store = Buffer.alloc(bytes.length + 64, 0x20);
    bytes.copy(store, 17);
    const shared = new SharedArrayBuffer(bytes.length);
    new Uint8Array(shared).set(bytes);
    const given: Array<[string, unknown]> = [
      ['a Uint8Array of another realm', vm.runInNewContext('new Uint8Array(b)', { b: [...bytes] })],
      ['an ArrayBuffer of another realm', vm.runInNewContext('new Uint8Array(b).buffer', { b: [...bytes] })],
      ['a DataView', new DataView(store.buffer, store.byteOffset + 17, bytes.length)],
      ['an Int8Array', new Int8Array(store.buffer, store.byteOffset + 17, bytes.length)],
      ['a SharedArrayBuffer', shared],
    ];
    for (const [name, rawBody] of given) {
      expect({ name, id: verifyWebhook(rawBody as Uint8Array, headersOf(BODY), SECRET, { now }).id }).toEqual({ name, id: 'evt-1' });
    }
    const refusalOf = (rawBody: unknown) => {
      try {
        verifyWebhook(rawBody as string, headersOf(BODY), SECRET, { now });
      } catch (error) {
        expect(error).toMatchObject({ code: 'raw_body_required' });
        return (error as Error).message;
      }
      throw new Error('verified');
    };
    expect(refusalOf(new Map())).toContain('got an object of class Map.');
    expect(refusalOf(new Blob([BODY]))).toContain('got an object of class Blob.');
    expect(refusalOf(vm.runInNewContext('JSON.parse(b)', { b: BODY }))).toContain('got an object (a parsed JSON body?).');
  });

  it('verifies and parses one private copy: bytes the caller changes meanwhile (shared memory) are not what it returns', () => {
    const bytes = Buffer.from(BODY);
    for (const memory of ['SharedArrayBuffer', 'Uint8Array'] as const) {
      const store = memory === 'SharedArrayBuffer' ? new SharedArrayBuffer(bytes.length) : new ArrayBuffer(bytes.length);
      const view = new Uint8Array(store);
      view.set(bytes);
      // Another thread writing the memory between the signature checks and the parse, here from the clock callback.
      const forged = Buffer.from(BODY.replace('evt-1', 'evt-9'));
      const changing = () => {
        view.set(forged);
        return now();
      };
      const given = memory === 'SharedArrayBuffer' ? store : view;
      expect({ memory, id: verifyWebhook(given as Uint8Array, headersOf(BODY), SECRET, { now: changing }).id }).toEqual({ memory, id: 'evt-1' });
    }
  });

  it('a toleranceSeconds that is not a finite number from 0 (NaN of an unset variable) is a TypeError, never "any age"', () => {
    const old = headersOf(BODY, T - 611);
    expect(codeOf(() => verifyWebhook(BODY, old, SECRET, { now }))).toBe('timestamp_invalid');
    for (const toleranceSeconds of [Number(process.env.WEBHOOK_TOLERANCE_UNSET), Infinity, -1, '300' as unknown as number]) {
      expect(() => verifyWebhook(BODY, old, SECRET, { now, toleranceSeconds })).toThrow(
        new TypeError(`verifyWebhook: toleranceSeconds must be a finite number of seconds from 0, got ${String(toleranceSeconds)}`),
      );
    }
    expect(verifyWebhook(BODY, headersOf(BODY), SECRET, { now, toleranceSeconds: 0 }).id).toBe('evt-1');
    expect(verifyWebhook(BODY, old, SECRET, { now, toleranceSeconds: 611 }).id).toBe('evt-1');
  });

  it('a now that is not a function (the clock in ms itself) is a TypeError that says so', () => {
    expect(() => verifyWebhook(BODY, headersOf(BODY), SECRET, { now: now() as unknown as () => number })).toThrow(
      new TypeError('verifyWebhook: now must be a function answering the clock in ms (as Date.now), got number'),
    );
  });

  it('a now that answers no finite number (a forgotten return, an ISO text) is a TypeError, never "any age"', () => {
    const old = 1_000_000_000; // 2001
    const replayed = headersOf(BODY, old);
    for (const answer of [undefined, new Date(T * 1000).toISOString(), NaN]) {
      expect(() => verifyWebhook(BODY, replayed, SECRET, { now: () => answer as unknown as number })).toThrow(TypeError);
    }
    expect(codeOf(() => verifyWebhook(BODY, replayed, SECRET, { now }))).toBe('timestamp_invalid');
  });

  it("with mode, refuses a delivery of the other mode (test and live share the project's URL and secret)", () => {
    const live = JSON.stringify({ ...JSON.parse(BODY), isTest: false });
    expect(codeOf(() => verifyWebhook(BODY, headersOf(BODY), SECRET, { now, mode: 'live' }))).toBe('mode_mismatch');
    expect(verifyWebhook(live, headersOf(live), SECRET, { now, mode: 'live' }).isTest).toBe(false);
    expect(verifyWebhook(BODY, headersOf(BODY), SECRET, { now, mode: 'test' }).isTest).toBe(true);
    expect(codeOf(() => verifyWebhook(live, headersOf(live), SECRET, { now, mode: 'test' }))).toBe('mode_mismatch');
    // Without it, both (isTest tells them apart); another value is a TypeError.
    expect(verifyWebhook(BODY, headersOf(BODY), SECRET, { now }).isTest).toBe(true);
    expect(() => verifyWebhook(BODY, headersOf(BODY), SECRET, { now, mode: 'prod' as 'live' })).toThrow(TypeError);
  });

  it('a MAC over "<t>.<body>" (the API\'s HMAC credential with the same secret) is no timestamped webhook signature', () => {
    const apiShaped = { ...headersOf(BODY), 'x-service-signature-timestamped': `t=${T},v2=${mac(`${T}.${BODY}`)}` };
    expect(codeOf(() => verifyWebhook(BODY, apiShaped, SECRET, { now }))).toBe('signature_invalid');
    const oldLabel = { ...headersOf(BODY), 'x-service-signature-timestamped': `t=${T},v1=${mac(`${T}.${BODY}`)}` };
    expect(codeOf(() => verifyWebhook(BODY, oldLabel, SECRET, { now }))).toBe('signature_invalid');
  });

  it('refuses a signed body that is not an event, and a malformed timestamped header', () => {
    expect(codeOf(() => verifyWebhook('[1]', headersOf('[1]'), SECRET, { now }))).toBe('payload_invalid');
    expect(codeOf(() => verifyWebhook('nope', headersOf('nope'), SECRET, { now }))).toBe('payload_invalid');
    const malformed = { ...headersOf(BODY), 'x-service-signature-timestamped': `v2=${mac(`webhook.${T}.${BODY}`)}` };
    expect(codeOf(() => verifyWebhook(BODY, malformed, SECRET, { now }))).toBe('signature_invalid');
  });
});
