import { lookup as dnsLookup, LookupAddress } from 'node:dns';
import { isIP, Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { Agent, buildConnector, Client, Dispatcher, Pool } from 'undici';
import { webhookAddressRefusal } from './webhook-address';
import { WEBHOOK_REPLY_BODY_LIMIT, WEBHOOK_REPLY_TIMEOUT_MS } from './webhook-rules';

export interface AttemptResult {
  readonly statusCode: number | null;
  /** The reply body, cut at WEBHOOK_REPLY_BODY_LIMIT bytes. */
  readonly body: string | null;
  readonly durationMs: number;
  readonly error: string | null;
}

/** Every address of the gateway host's own interfaces (read at each check: interfaces change). */
export function hostAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
}

/** Name resolution as `dns.lookup` with `all: true` (tests pass a resolver of their own). */
export type ResolveAll = (hostname: string, callback: (error: Error | null, addresses: LookupAddress[]) => void) => void;

const systemResolveAll: ResolveAll = (hostname, callback) => dnsLookup(hostname, { all: true }, (error, addresses) => callback(error, error ? [] : addresses));

/**
 * One lookup of a host name at a time, its answer shared by every caller meanwhile (attempts' checks, connections): a
 * name whose server does not answer holds one of libuv's 4 lookup threads, not one more per attempt cut at its limit,
 * which would leave the other merchants' lookups queued behind them past theirs.
 */
function oneLookupPerName(resolveAll: ResolveAll): ResolveAll {
  const pending = new Map<string, Parameters<ResolveAll>[1][]>();
  return (hostname, callback) => {
    const waiting = pending.get(hostname);
    if (waiting) return void waiting.push(callback);
    pending.set(hostname, [callback]);
    resolveAll(hostname, (error, addresses) => {
      const callbacks = pending.get(hostname) ?? [];
      pending.delete(hostname);
      for (const answer of callbacks) answer(error, addresses);
    });
  };
}

export interface WebhookClientOptions {
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS: no address is refused. */
  readonly allowPrivateNetworks: boolean;
  /** The whole attempt's limit (default 10 s). */
  readonly timeoutMs?: number;
  /** How host names are resolved (default the system's, as `dns.lookup`). */
  readonly resolveAll?: ResolveAll;
  /**
   * Why an address may not be connected to (null: it may), said of it without naming
   * it (`is not …`); default: not globally routable or one of the host's own
   * (webhookAddressRefusal with hostAddresses()).
   * Tests of the pooled guard pass a rule of their own over loopback addresses.
   */
  readonly addressRefusal?: (address: string) => string | null;
  /** How long an idle pooled connection is kept (default 4 s, shorter when the receiver's Keep-Alive says so). */
  readonly keepAliveMs?: number;
  /** How long a pooled connection is used at all, from its opening (default 60 s): then it is closed and a new one checked. */
  readonly connectionTtlMs?: number;
}

/** Posts one webhook: what the dispatcher calls (tests of the dispatcher may pass their own). */
export interface WebhookPoster {
  post(url: string, body: string, headers: Record<string, string>): Promise<AttemptResult>;
  close(): Promise<void>;
}

/**
 * The webhook HTTP client: POSTs over keep-alive connections pooled per origin
 * (undici's Agent), no redirect followed (a 3xx is not an acknowledgement), the reply
 * read up to the body limit, the whole attempt cut at 10 seconds (a status received by
 * then is the answer, with its body as far as it came). A request met by the close of
 * a reused connection before any reply byte (RFC 9112 §9.3.1: a server may close an idle
 * connection at any time) is sent once more, on a new connection, within the attempt.
 *
 * Unless private networks are allowed, only a globally routable address that is not
 * the host's own is connected to, and no attempt is sent while its URL's host is
 * refused:
 * - per attempt: an IP literal is checked; a host name is resolved and every address
 *   it resolves to is checked, and one refused address refuses the attempt (so a name
 *   that now resolves to a private address gets nothing, even over a connection
 *   opened when it resolved to a public one);
 * - per connection, when it is opened: the lookup the connection itself uses refuses
 *   the same way (nothing is connected to a refused address, whatever the name
 *   answered a moment earlier), and the peer address of the open socket is checked
 *   again before any byte is written;
 * - a pooled connection is reused only within its origin's pool of this client, for at
 *   most `connectionTtlMs` from its opening and `keepAliveMs` idle.
 * A refused attempt sends nothing and keeps no reply body.
 */
export class WebhookHttpClient implements WebhookPoster {
  private readonly agent: Agent;
  private readonly timeoutMs: number;
  private readonly resolveAll: ResolveAll;
  private readonly refusal: ((address: string) => string | null) | null;
  /** Connections opened so far (a test's check that connections are reused). */
  connectionsOpened = 0;
  /** Parsed URLs by their text. */
  private readonly targets = new Map<string, Target | string>();

  constructor(options: WebhookClientOptions) {
    this.timeoutMs = options.timeoutMs ?? WEBHOOK_REPLY_TIMEOUT_MS;
    this.resolveAll = oneLookupPerName(options.resolveAll ?? systemResolveAll);
    this.refusal = options.allowPrivateNetworks ? null : (options.addressRefusal ?? ((address) => webhookAddressRefusal(address, hostAddresses())));
    const refusal = this.refusal;
    const resolveAll = this.resolveAll;
    // The lookup every new connection uses: a host name with one refused address is not connected to.
    const lookup = (hostname: string, lookupOptions: { all?: boolean }, callback: (e: Error | null, a: string | LookupAddress[], f?: number) => void) =>
      resolveAll(hostname, (error, addresses) => {
        if (error) return callback(error, []);
        const refused = refusal ? refusedOf(hostname, addresses, refusal) : null;
        if (refused) return callback(new Error(refused), []);
        if (lookupOptions.all) return callback(null, addresses);
        callback(null, addresses[0]!.address, addresses[0]!.family);
      });
    const base = buildConnector({ timeout: this.timeoutMs, lookup: lookup as never });
    const connect: buildConnector.connector = (connectOptions, callback) =>
      base(connectOptions, (error, socket) => {
        if (error) return callback(error, null);
        // The address actually connected to, checked before the first request is written.
        const peer = (socket as Socket).remoteAddress ?? 'an unknown address';
        const refused = refusal?.(peer) ?? null;
        if (refused) {
          socket!.destroy();
          return callback(new Error(`refused: ${peer} ${refused}`), null);
        }
        this.connectionsOpened++;
        callback(null, socket!);
      });
    // Our own timer cuts the whole attempt; undici's per-phase limits stay above it.
    const limits = { headersTimeout: this.timeoutMs + 1000, bodyTimeout: this.timeoutMs + 1000 };
    this.agent = new Agent({
      connect,
      keepAliveTimeout: options.keepAliveMs ?? 4000,
      keepAliveMaxTimeout: options.keepAliveMs ?? 4000,
      clientTtl: options.connectionTtlMs ?? 60_000,
      ...limits,
      // Each pooled connection tells an attempt whether it was reused and whether a reply byte came.
      factory: (origin, agentOptions) =>
        new Pool(origin, { ...agentOptions, factory: (o, clientOptions) => new NotingClient(o, clientOptions as Client.Options) }),
    });
    this.freshClient = (origin) => new Client(origin, { connect, ...limits });
  }

  /** A client of one new connection to `origin` (the second send of an attempt whose reused connection closed first). */
  private readonly freshClient: (origin: string) => Client;

  /** Why an attempt to `host` is refused now (null: it is not); a host name is resolved for it. */
  private hostRefusal(host: string): Promise<string | null> {
    const refusal = this.refusal;
    if (!refusal) return Promise.resolve(null);
    if (isIP(host) !== 0) {
      const refused = refusal(host);
      return Promise.resolve(refused ? `refused: ${host} ${refused}` : null);
    }
    return new Promise((resolve) =>
      // A name that does not resolve is not refused here: the connection's own lookup fails with the resolver's error.
      this.resolveAll(host, (error, addresses) => resolve(error ? null : refusedOf(host, addresses, refusal))),
    );
  }

  /** A URL as an attempt uses it (or why it cannot be posted to), parsed once per URL text. */
  private targetOf(url: string): Target | string {
    let target = this.targets.get(url);
    if (target === undefined) {
      target = parseTarget(url);
      // Bounded: a dispatcher sees as many URLs as projects with webhooks.
      if (this.targets.size >= 1000) this.targets.clear();
      this.targets.set(url, target);
    }
    return target;
  }

  post(url: string, body: string, headers: Record<string, string>): Promise<AttemptResult> {
    const started = performance.now();
    const target = this.targetOf(url);
    if (typeof target === 'string') return Promise.resolve(attemptResult(started, null, null, target));
    // Without a refusal rule (private networks allowed) nothing is awaited before the request.
    if (this.refusal === null) return this.exchange(target, body, headers, started);
    // The check's lookup counts in the attempt's limit, as the connection's does: a name server that does not answer
    // must not stretch an attempt past its lease (the delivery would be claimed and sent again).
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(`no reply within ${this.timeoutMs / 1000} s (the host name did not resolve in time)`), this.timeoutMs);
    });
    return Promise.race([this.hostRefusal(target.host).then((refused) => ({ refused })), late.then((error) => ({ error }))]).then((checked) => {
      clearTimeout(timer);
      if ('error' in checked) return attemptResult(started, null, null, checked.error);
      return checked.refused ? attemptResult(started, null, null, checked.refused) : this.exchange(target, body, headers, started);
    });
  }

  /** The request and its reply (the guard has let the attempt through). */
  private exchange(target: Target, body: string, headers: Record<string, string>, started: number): Promise<AttemptResult> {
    const done = (statusCode: number | null, reply: string | null, error: string | null): AttemptResult => attemptResult(started, statusCode, reply, error);
    return new Promise<AttemptResult>((resolve) => {
      let settled = false;
      let statusCode: number | null = null;
      let size = 0;
      const chunks: Buffer[] = [];
      let controller: Dispatcher.DispatchController | null = null;
      const kept = () => Buffer.concat(chunks).subarray(0, WEBHOOK_REPLY_BODY_LIMIT).toString('utf8');
      const finish = (result: AttemptResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        // The one-connection client of a second send closes once its request is done.
        if (fresh) void (fresh as Client).close().catch(() => undefined);
        // After undici has made the connection free again (a reply's end schedules that for
        // the next check phase, setImmediate): the next attempt then reuses it instead of
        // opening another. Scheduled once the parser's callback has returned (a microtask),
        // so it runs right after undici's, in the same check phase, not a turn later.
        queueMicrotask(() => setImmediate(resolve, result));
      };
      const timer = setTimeout(
        () => {
          // A status that came in time is the receiver's answer (spec: a 2xx within 10 seconds); its body is kept as far as it came.
          const late = `${this.timeoutMs / 1000} s`;
          finish(statusCode === null ? done(null, null, `no reply within ${late}`) : done(statusCode, kept(), `the reply's body did not end within ${late}`));
          controller?.abort(new Error('the attempt took too long'));
        },
        // What is left of the attempt's limit after the host name's check.
        Math.max(0, this.timeoutMs - (performance.now() - started)),
      );
      const request: Dispatcher.DispatchOptions = {
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'user-agent': 'payment-gateway-webhooks/1',
        },
        body,
      };
      // The connection the request went out on (told by the pool when it is written).
      let connection: ConnectionUse | null = null;
      let fresh: Client | null = null;
      const resend = () => {
        // RFC 9112 §9.3.1: a server may close an idle connection at any time, and a
        // request that met the close on a reused connection before any reply byte is
        // sent once more, on a new connection (once, within the same attempt).
        if (settled) return;
        fresh = this.freshClient(target.origin);
        fresh.dispatch(request, handler);
      };
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(c) {
          controller = c;
          if (settled) c.abort(new Error('the attempt took too long'));
        },
        onResponseStart(_c, status) {
          statusCode = status;
        },
        onResponseData(c, chunk: Buffer) {
          if (size < WEBHOOK_REPLY_BODY_LIMIT) chunks.push(chunk);
          size += chunk.length;
          if (size >= WEBHOOK_REPLY_BODY_LIMIT) {
            // Enough for the history: the rest is not read (the connection is closed).
            finish(done(statusCode, kept(), null));
            c.abort(new Error('reply body limit reached'));
          }
        },
        onResponseEnd() {
          finish(done(statusCode, kept(), null));
        },
        onResponseError(_c, error) {
          if (!settled && fresh === null && statusCode === null && connection?.reused && !connection.replied() && closedConnection(error)) {
            queueMicrotask(resend);
            return;
          }
          finish(done(statusCode, statusCode === null ? null : kept(), errorText(error)));
        },
      };
      this.agent.dispatch({ ...request, [kOnConnection]: (use: ConnectionUse) => (connection = use) } as Dispatcher.DispatchOptions, handler);
    });
  }

  /** Closes the pooled connections (on shutdown). */
  async close(): Promise<void> {
    await this.agent.close();
  }
}

/** What a pooled connection tells an attempt whose request it carries (given as `kOnConnection` in the dispatch options). */
interface ConnectionUse {
  /** Whether the connection carried a request before this one. */
  readonly reused: boolean;
  /** Whether any byte came over it since this request was written. */
  replied(): boolean;
}

const kOnConnection = Symbol('webhook connection use');

/**
 * One pooled connection at a time (undici's Client) that tells the attempt whose
 * request it writes whether the connection was reused, and later whether any reply
 * byte came: a request whose reused connection closed before any is sent again.
 */
class NotingClient extends Client {
  private readonly noted: { socket: Socket | null; requests: number };

  constructor(origin: string | URL, options: Client.Options) {
    const noted = { socket: null as Socket | null, requests: 0 };
    const connect = options.connect as buildConnector.connector;
    super(origin, {
      ...options,
      connect: (connectOptions, callback) =>
        connect(connectOptions, (error, socket) => {
          if (error) return callback(error, null);
          Object.assign(noted, { socket, requests: 0 });
          callback(null, socket!);
        }),
    });
    this.noted = noted;
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const tell = (options as { [kOnConnection]?: (use: ConnectionUse) => void })[kOnConnection];
    // The pool hands over undici's own (legacy) handler; its onConnect is called as the request is written on the connection.
    const inner = handler as Dispatcher.DispatchHandler & { onConnect?(abort: (e?: Error) => void, context: object): void };
    if (!tell || typeof inner.onConnect !== 'function') return super.dispatch(options, handler);
    const noted = this.noted;
    const noting = new Proxy(inner, {
      get(target, key) {
        if (key === 'onConnect') {
          return (abort: (e?: Error) => void, context: object) => {
            const socket = noted.socket;
            const readBefore = socket?.bytesRead ?? 0;
            tell({ reused: noted.requests++ > 0, replied: () => (socket?.bytesRead ?? 0) > readBefore });
            return target.onConnect!(abort, context);
          };
        }
        const value: unknown = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    return super.dispatch(options, noting);
  }
}

/** Whether an exchange failed because its connection closed or was reset (not a limit or an abort of ours). */
function closedConnection(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE';
}

/** What an attempt needs of its URL: the origin, the path with the query, the host as the guard checks it. */
interface Target {
  readonly origin: string;
  readonly path: string;
  readonly host: string;
}

/** The URL's target, or why an attempt to it is not made. */
function parseTarget(url: string): Target | string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'invalid URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return 'only http and https URLs are allowed';
  return { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}`, host: parsed.hostname.replace(/^\[|\]$/g, '') };
}

function attemptResult(started: number, statusCode: number | null, body: string | null, error: string | null): AttemptResult {
  return { statusCode, body, durationMs: Math.round(performance.now() - started), error };
}

/** The refusal of a resolved name: one refused address refuses it. */
function refusedOf(hostname: string, addresses: readonly LookupAddress[], refusal: (address: string) => string | null): string | null {
  for (const a of addresses) {
    const refused = refusal(a.address);
    if (refused) return `refused: ${hostname} resolves to ${a.address}, which ${refused}`;
  }
  return null;
}

/** The error of a failed exchange as the history shows it (undici wraps a socket's own error as its cause). */
function errorText(error: unknown): string {
  const e = error as Error & { cause?: Error; code?: string };
  const message = e?.message || e?.code || String(error);
  return e?.cause?.message && !message.includes(e.cause.message) ? `${message}: ${e.cause.message}` : message;
}
