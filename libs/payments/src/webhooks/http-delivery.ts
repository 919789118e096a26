import { lookup as dnsLookup, LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { webhookAddressRefusal } from './webhook-address';
import { WEBHOOK_REPLY_BODY_LIMIT, WEBHOOK_REPLY_TIMEOUT_MS } from './webhook-rules';

export interface AttemptResult {
  readonly statusCode: number | null;
  /** The reply body, cut at WEBHOOK_REPLY_BODY_LIMIT bytes. */
  readonly body: string | null;
  readonly durationMs: number;
  readonly error: string | null;
}

/** Every address of the gateway host's own interfaces (read at each delivery: cheap, and interfaces change). */
export function hostAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
}

/**
 * A DNS lookup that refuses an address a webhook may not reach (not globally
 * routable, or the host's own): the address it answers is the one connected to.
 */
function publicOnlyLookup(hostname: string, options: object, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const list = addresses as LookupAddress[];
    const own = hostAddresses();
    for (const a of list) {
      const refusal = webhookAddressRefusal(a.address, own);
      if (refusal) return callback(new Error(`refused: ${hostname} resolves to ${refusal}`), []);
    }
    if ((options as { all?: boolean }).all) return callback(null, list);
    callback(null, list[0]!.address, list[0]!.family);
  });
}

/**
 * One POST of a webhook: no redirect is followed (a 3xx is not an acknowledgement),
 * the reply is read up to the body limit, the whole attempt is cut at 10 seconds,
 * and, unless private networks are allowed, only a globally routable address that is
 * not the host's own is connected to (an IP literal is checked before connecting, a
 * host name's addresses in the lookup the connection uses). A refused attempt sends
 * nothing and keeps no reply body.
 */
export function postWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: { allowPrivateNetworks: boolean; timeoutMs?: number },
): Promise<AttemptResult> {
  const started = performance.now();
  const done = (statusCode: number | null, reply: string | null, error: string | null): AttemptResult => ({
    statusCode,
    body: reply,
    durationMs: Math.round(performance.now() - started),
    error,
  });
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return Promise.resolve(done(null, null, 'invalid URL'));
  }
  if (target.protocol !== 'http:' && target.protocol !== 'https:') return Promise.resolve(done(null, null, 'only http and https URLs are allowed'));
  const host = target.hostname.replace(/^\[|\]$/g, '');
  if (!options.allowPrivateNetworks && isIP(host) !== 0) {
    const refusal = webhookAddressRefusal(host, hostAddresses());
    if (refusal) return Promise.resolve(done(null, null, `refused: ${refusal}`));
  }
  const transport = target.protocol === 'https:' ? https : http;
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const request = transport.request(
      target,
      {
        method: 'POST',
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'user-agent': 'payment-gateway-webhooks/1',
        },
        agent: false,
        ...(options.allowPrivateNetworks ? {} : { lookup: publicOnlyLookup as never }),
      },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const keep = () => Buffer.concat(chunks).subarray(0, WEBHOOK_REPLY_BODY_LIMIT).toString('utf8');
        response.on('data', (chunk: Buffer) => {
          if (size < WEBHOOK_REPLY_BODY_LIMIT) chunks.push(chunk);
          size += chunk.length;
          if (size >= WEBHOOK_REPLY_BODY_LIMIT) {
            // Enough for the history: the rest is not read.
            finish(done(response.statusCode ?? null, keep(), null));
            response.destroy();
          }
        });
        response.on('end', () => finish(done(response.statusCode ?? null, keep(), null)));
        response.on('error', (error) => finish(done(response.statusCode ?? null, keep(), error.message)));
      },
    );
    const timer = setTimeout(() => {
      finish(done(null, null, `no reply within ${(options.timeoutMs ?? WEBHOOK_REPLY_TIMEOUT_MS) / 1000} s`));
      request.destroy();
    }, options.timeoutMs ?? WEBHOOK_REPLY_TIMEOUT_MS);
    request.on('error', (error) => finish(done(null, null, error.message)));
    request.end(body);
  });
}
