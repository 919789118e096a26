import { lookup as dnsLookup, LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP } from 'node:net';
import { WEBHOOK_REPLY_BODY_LIMIT, WEBHOOK_REPLY_TIMEOUT_MS } from './webhook-rules';

export interface AttemptResult {
  readonly statusCode: number | null;
  /** The reply body, cut at WEBHOOK_REPLY_BODY_LIMIT bytes. */
  readonly body: string | null;
  readonly durationMs: number;
  readonly error: string | null;
}

/** Addresses a live webhook may not reach: loopback, private, link-local, shared, multicast and unspecified. */
const PRIVATE = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
] as const) {
  PRIVATE.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  PRIVATE.addSubnet(net, prefix, 'ipv6');
}

export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return PRIVATE.check(address, 'ipv4');
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    return mapped ? PRIVATE.check(mapped[1]!, 'ipv4') : PRIVATE.check(address, 'ipv6');
  }
  return true;
}

/** A DNS lookup that refuses private addresses: checked on the address actually connected to. */
function publicOnlyLookup(hostname: string, options: object, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const list = addresses as LookupAddress[];
    const blocked = list.find((a) => isPrivateAddress(a.address));
    if (blocked) return callback(new Error(`refused: ${hostname} resolves to a private address (${blocked.address})`), []);
    if ((options as { all?: boolean }).all) return callback(null, list);
    callback(null, list[0]!.address, list[0]!.family);
  });
}

/**
 * One POST of a webhook: no redirect is followed (a 3xx is not an acknowledgement),
 * the reply is read up to the body limit, the whole attempt is cut at 10 seconds,
 * and, unless private networks are allowed, no private address is connected to.
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
  if (!options.allowPrivateNetworks && isIP(host) !== 0 && isPrivateAddress(host)) {
    return Promise.resolve(done(null, null, `refused: ${host} is a private address`));
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
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'payment-gateway-webhooks/1' },
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
