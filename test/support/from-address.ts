/**
 * HTTP requests from a chosen local address (127.0.0.2, 127.0.0.3, …: every
 * 127/8 address is this machine's loopback), so one test can be several clients.
 */
import http, { IncomingHttpHeaders } from 'node:http';

export interface AddressedReply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  // Response bodies are whatever the gateway sent; the tests assert their shape.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any;
}

export interface ClientAt {
  readonly address: string;
  request(method: string, path: string, init?: { headers?: Record<string, string>; body?: string }): Promise<AddressedReply>;
  close(): void;
}

/** A client of `baseUrl` whose connections come from `localAddress` (kept alive between requests). */
export function clientAt(baseUrl: string, localAddress: string): ClientAt {
  const agent = new http.Agent({ keepAlive: true, localAddress } as http.AgentOptions);
  const base = new URL(baseUrl);
  return {
    address: localAddress,
    request: (method, path, init = {}) =>
      new Promise((resolve, reject) => {
        const req = http.request(
          {
            host: base.hostname,
            port: base.port,
            method,
            path,
            agent,
            headers: { ...(init.headers ?? {}), ...(init.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(init.body)) }) },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              let body: unknown = text;
              try {
                body = text === '' ? null : JSON.parse(text);
              } catch {
                body = text;
              }
              resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
            });
            res.on('error', reject);
          },
        );
        req.on('error', reject);
        req.end(init.body);
      }),
    close: () => agent.destroy(),
  };
}

/** Runs `tasks` with at most `inFlight` at once; answers their results in order. */
export async function inBatches<T>(tasks: readonly (() => Promise<T>)[], inFlight: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(inFlight, tasks.length) }, async () => {
      while (next < tasks.length) {
        const i = next++;
        results[i] = await tasks[i]!();
      }
    }),
  );
  return results;
}
