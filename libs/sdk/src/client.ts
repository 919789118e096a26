import { createHash, randomUUID } from 'node:crypto';
import { PaymentGatewayAbortError, PaymentGatewayConnectionError, PaymentGatewayError } from './errors';
import { MAX_RETRIES, MAYBE_WRITTEN_MARK, parseRetryAfter, retryDelayMs } from './retry-policy';
import type { AttemptOutcome } from './retry-policy';
import { signRequest } from './signing';
import type {
  AuditKeyList,
  Balance,
  Statement,
  StatementQuery,
  CreateInvoiceRequest,
  CreatePayoutRequest,
  ErrorDetail,
  Invoice,
  InvoiceCreated,
  InvoiceList,
  ListInvoicesQuery,
  ListPayoutsQuery,
  MethodList,
  Payout,
  PayoutAddressList,
  PayoutList,
  Refund,
  RefundInvoiceRequest,
  BalanceTransaction,
  BalanceTransactionList,
  Event,
  EventList,
  ListBalanceTransactionsQuery,
  ListEventsQuery,
  WebhookEvent,
} from './types';

/** Mode 1 (Bearer secret key) or mode 2 (HMAC: public key plus the project's webhook secret). */
export type Authentication = { readonly secretKey: string } | { readonly publicId: string; readonly signingSecret: string };

export interface PaymentGatewayClientOptions {
  /** The base address ending in the version /v1, e.g. `https://pay.example.com/v1` (or `http://127.0.0.1:3000/v1`); else a TypeError. */
  readonly baseUrl: string;
  readonly auth: Authentication;
  /** At most this many retries of one call: a whole number from 0 to 4 (default and maximum by the spec's guidance: 4). */
  readonly maxRetries?: number | undefined;
  /** One attempt's time limit in ms, a whole number from 1 to 2^31 − 1 (default 30 000); a timeout counts as a network failure. */
  readonly timeoutMs?: number | undefined;
  /** The fetch to use (default: the global fetch of Node ≥ 20). */
  readonly fetch?: typeof fetch | undefined;
  /** How to wait between attempts (default: setTimeout); tests pass their own. A call's signal ends the wait either way. */
  readonly sleep?: ((ms: number) => Promise<void>) | undefined;
  /** The local clock in ms for X-Timestamp (default Date.now). */
  readonly now?: (() => number) | undefined;
  /** Whole seconds to add to the local clock for X-Timestamp (default 0; learnt from the gateway on a 401 timestamp_invalid); else a TypeError. */
  readonly clockOffsetSeconds?: number | undefined;
  /** Makes the Idempotency-Key of a POST that is not given one (default: a random UUID). */
  readonly newIdempotencyKey?: (() => string) | undefined;
}

export interface CallOptions {
  /**
   * Cancels this call: the request in flight and any wait before a retry. The call then
   * rejects with a PaymentGatewayAbortError (name `AbortError`; `cause`: the signal's reason).
   */
  readonly signal?: AbortSignal | undefined;
}

export interface PostOptions extends CallOptions {
  /** The Idempotency-Key to send (default: a new one per call, reused by its retries). */
  readonly idempotencyKey?: string | undefined;
}

/**
 * What a create answered besides the object: `created` is true when this answer made it
 * (201, a refund's 202), false when it already existed (the spec's 200 of a repeated
 * orderId, or an Idempotency-Key's replay). With `attempts` over 1 it may be this call's
 * own earlier attempt, whose answer was lost, that made it.
 */
export interface Creation {
  readonly created: boolean;
  /** How many attempts the call made (1 = no retry). */
  readonly attempts: number;
}

/** An answer of the API with its status. */
interface Answer<T> {
  readonly body: T;
  readonly status: number;
  /** The answer is an Idempotency-Key's replay of an earlier one (Idempotent-Replayed: true). */
  readonly replayed: boolean;
  readonly attempts: number;
}

type Query = Readonly<Record<string, string | number | undefined>>;

/**
 * The least an operation's answer holds, checked before it is returned: a field and its JSON type (a resource's `id`,
 * a list's `items`). A proxy's JSON or a page a redirect led to lacks it: not the API's answer.
 */
type Holds = readonly [field: string, type: 'string' | 'number' | 'array'];

interface CallSpec {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly holds: Holds;
  /** The 2xx statuses the spec gives the operation (default: 200). */
  readonly statuses?: readonly number[];
  readonly query?: Query;
  readonly body?: unknown;
  readonly idempotencyKey?: string;
  /** A repeat cannot act twice. */
  readonly repeatable: boolean;
  readonly signal?: AbortSignal;
}

/** setTimeout, cleared when the signal aborts (the caller stops waiting on it then). */
const defaultSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const stop = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', stop);
      resolve();
    }, ms);
    signal?.addEventListener('abort', stop, { once: true });
  });

/**
 * How far ahead of its clock the client takes an X-Timestamp: not at all. A body already
 * signed in this second waits for the next second. Seconds taken ahead would stay used at
 * the gateway, and another process of the key (or this one restarted) starting from its
 * clock would walk into them, refused 401 signature_invalid for as long as the lead.
 */
export const MAX_TIMESTAMP_LEAD_SECONDS = 0;
/** How many times a 401 signature_invalid with param X-Timestamp (a second another process of the key used) is signed again, each in a later second. */
const SIGNATURE_RETRIES = 3;
const ID: Holds = ['id', 'string'];
const NUMBER_ID: Holds = ['id', 'number'];
const ITEMS: Holds = ['items', 'array'];
/** A create's statuses: 201 made by this request, 200 the orderId's existing one. */
const CREATED_OR_EXISTING = [200, 201];
/** The longest timeoutMs: Node's timers take 32-bit delays (a longer one fires after 1 ms). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;
/** The gateway's window for X-Timestamp: ±300 s of its clock. */
const GATEWAY_WINDOW_SECONDS = 300;

/**
 * The merchant API v1 client. Every method is one operation of GET /v1/openapi.json
 * (its operationId); answers and errors are typed. Retries follow the spec (see
 * retry-policy.ts); a POST other than POST /invoices always carries an Idempotency-Key,
 * the same on each of its retries, so a retry never refunds or pays out twice.
 */
export class PaymentGatewayClient {
  private readonly baseUrl: string;
  readonly #auth: Authentication;
  private readonly maxRetries: number;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;
  private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  private readonly now: () => number;
  private readonly newIdempotencyKey: () => string;
  /** The clock offset and used timestamps: shared by the clients of this secret and gateway in the process (HMAC mode). */
  private readonly memory: SigningMemory;

  constructor(options: PaymentGatewayClientOptions) {
    this.baseUrl = checkBaseUrl(options.baseUrl);
    if ('secretKey' in options.auth) checkCredential('auth.secretKey', options.auth.secretKey);
    else {
      checkCredential('auth.publicId', options.auth.publicId);
      // Never sent, but read from a file or the environment as the others: a line break with it signs every request wrongly.
      checkCredential('auth.signingSecret', options.auth.signingSecret);
    }
    this.#auth = options.auth;
    const maxRetries = options.maxRetries ?? MAX_RETRIES;
    if (typeof maxRetries !== 'number' || !Number.isInteger(maxRetries) || maxRetries < 0 || maxRetries > MAX_RETRIES)
      throw new TypeError(`maxRetries: a whole number from 0 to ${MAX_RETRIES}, got ${String(maxRetries)}`);
    this.maxRetries = maxRetries;
    const timeoutMs = options.timeoutMs ?? 30_000;
    if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS)
      throw new TypeError(`timeoutMs: a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}, got ${String(timeoutMs)}`);
    this.timeoutMs = timeoutMs;
    // Added to the clock and sent in X-Timestamp: a string would be joined to it, NaN or a fraction sent as it is.
    const offset = options.clockOffsetSeconds;
    if (offset !== undefined && (typeof offset !== 'number' || !Number.isSafeInteger(offset)))
      throw new TypeError(
        `clockOffsetSeconds: a whole number of seconds (negative allowed), got ${typeof offset === 'string' ? JSON.stringify(offset) : String(offset)}`,
      );
    this.fetch = options.fetch ?? globalThis.fetch;
    this.sleep = options.sleep ?? defaultSleep;
    this.now = options.now ?? Date.now;
    this.newIdempotencyKey = options.newIdempotencyKey ?? randomUUID;
    this.memory = 'signingSecret' in this.#auth ? memoryOf(this.#auth.signingSecret, this.baseUrl) : newSigningMemory();
    // Given up front, the offset is the first client's: once one has signed or learnt the gateway's clock, that stands.
    const { learnt, used } = this.memory;
    if (offset !== undefined && !learnt && used.size === 0) this.memory.offsetSeconds = offset;
  }

  /** Seconds added to the local clock for X-Timestamp (HMAC mode), as given or as learnt from the gateway. */
  get clockOffsetSeconds(): number {
    return this.memory.offsetSeconds;
  }

  // Invoices ----------------------------------------------------------------

  /** POST /invoices (createInvoice). Repeating with the same orderId is safe: retried by its orderId. */
  createInvoice(body: CreateInvoiceRequest, options: PostOptions = {}): Promise<InvoiceCreated> {
    return this.createInvoiceWithOutcome(body, options).then((outcome) => outcome.invoice);
  }

  /** createInvoice, telling a new invoice (201: `created` true) from the orderId's existing one (200: false). */
  async createInvoiceWithOutcome(body: CreateInvoiceRequest, options: PostOptions = {}): Promise<Creation & { readonly invoice: InvoiceCreated }> {
    const spec: CallSpec = {
      method: 'POST',
      path: '/invoices',
      holds: ID,
      statuses: CREATED_OR_EXISTING,
      body,
      idempotencyKey: options.idempotencyKey,
      repeatable: true,
      signal: options.signal,
    };
    const answer = await this.exchange<InvoiceCreated>(spec);
    return { invoice: answer.body, ...creation(answer) };
  }

  /** GET /invoices (listInvoices): one page. */
  listInvoices(query: ListInvoicesQuery = {}, options: CallOptions = {}): Promise<InvoiceList> {
    return this.call({ method: 'GET', path: '/invoices', holds: ITEMS, query, repeatable: true, signal: options.signal });
  }

  /** Every invoice that matches `query`, newest first, page after page (GET /invoices with each nextCursor). */
  iterateInvoices(query: Omit<ListInvoicesQuery, 'cursor'> = {}, options: CallOptions = {}): AsyncGenerator<Invoice, void, undefined> {
    return everyItem((q) => this.listInvoices(q, options), query);
  }

  /** GET /invoices/{id} (getInvoice). */
  async getInvoice(id: string, options: CallOptions = {}): Promise<Invoice> {
    return this.call({ method: 'GET', path: `/invoices/${segment('id', id)}`, holds: ID, repeatable: true, signal: options.signal });
  }

  // Refunds -----------------------------------------------------------------

  /** POST /invoices/{id}/refund (refundInvoice): the whole remainder without amount. Retried under its Idempotency-Key. */
  refundInvoice(invoiceId: string, body: RefundInvoiceRequest = {}, options: PostOptions = {}): Promise<Refund> {
    return this.refundInvoiceWithOutcome(invoiceId, body, options).then((outcome) => outcome.refund);
  }

  /** refundInvoice, telling a new refund (202: `created` true) from its Idempotency-Key's replay (false). */
  async refundInvoiceWithOutcome(
    invoiceId: string,
    body: RefundInvoiceRequest = {},
    options: PostOptions = {},
  ): Promise<Creation & { readonly refund: Refund }> {
    // JSON drops an undefined amount: the request would refund the whole remainder (the gateway refuses a body that
    // lost its amount on the way for the same reason). A full refund omits amount.
    if (typeof body === 'object' && body !== null && Object.hasOwn(body, 'amount') && body.amount === undefined)
      throw new TypeError('refundInvoice: amount is undefined; omit it for a full refund of the remainder. Nothing was sent');
    const answer = await this.exchange<Refund>({
      method: 'POST',
      path: `/invoices/${segment('invoiceId', invoiceId)}/refund`,
      holds: ID,
      statuses: [202],
      body,
      idempotencyKey: this.keyOf(options),
      repeatable: true,
      signal: options.signal,
    });
    return { refund: answer.body, ...creation(answer) };
  }

  /** GET /refunds/{id} (getRefund). */
  async getRefund(id: string, options: CallOptions = {}): Promise<Refund> {
    return this.call({ method: 'GET', path: `/refunds/${segment('id', id)}`, holds: ID, repeatable: true, signal: options.signal });
  }

  // Reference data ----------------------------------------------------------

  /** GET /methods (listMethods). */
  listMethods(options: CallOptions = {}): Promise<MethodList> {
    return this.call({ method: 'GET', path: '/methods', holds: ['methods', 'array'], repeatable: true, signal: options.signal });
  }

  /** GET /balance (getBalance). */
  getBalance(options: CallOptions = {}): Promise<Balance> {
    return this.call({ method: 'GET', path: '/balance', holds: ['available', 'string'], repeatable: true, signal: options.signal });
  }

  /** GET /statements (getStatement): the signed statement of (from, to]; check it with verifyStatement and listAuditKeys. */
  getStatement(query: StatementQuery, options: CallOptions = {}): Promise<Statement> {
    return this.call({ method: 'GET', path: '/statements', holds: ['transactions', 'array'], query, repeatable: true, signal: options.signal });
  }

  /** GET /audit/keys (listAuditKeys): the gateway's public signing keys, retired ones included. */
  listAuditKeys(options: CallOptions = {}): Promise<AuditKeyList> {
    return this.call({ method: 'GET', path: '/audit/keys', holds: ['keys', 'array'], repeatable: true, signal: options.signal });
  }

  // Payouts -----------------------------------------------------------------

  /** GET /payout-addresses (listPayoutAddresses). */
  listPayoutAddresses(options: CallOptions = {}): Promise<PayoutAddressList> {
    return this.call({ method: 'GET', path: '/payout-addresses', holds: ITEMS, repeatable: true, signal: options.signal });
  }

  /** POST /payouts (createPayout): live keys only. Retried under its Idempotency-Key. */
  createPayout(body: CreatePayoutRequest, options: PostOptions = {}): Promise<Payout> {
    return this.createPayoutWithOutcome(body, options).then((outcome) => outcome.payout);
  }

  /** createPayout, telling a new request (201: `created` true) from the orderId's existing one (200) or a key's replay (false). */
  async createPayoutWithOutcome(body: CreatePayoutRequest, options: PostOptions = {}): Promise<Creation & { readonly payout: Payout }> {
    const idempotencyKey = this.keyOf(options);
    const answer = await this.exchange<Payout>({
      method: 'POST',
      path: '/payouts',
      holds: NUMBER_ID,
      statuses: CREATED_OR_EXISTING,
      body,
      idempotencyKey,
      repeatable: true,
      signal: options.signal,
    });
    return { payout: answer.body, ...creation(answer) };
  }

  /** GET /payouts (listPayouts): one page. */
  listPayouts(query: ListPayoutsQuery = {}, options: CallOptions = {}): Promise<PayoutList> {
    return this.call({ method: 'GET', path: '/payouts', holds: ITEMS, query, repeatable: true, signal: options.signal });
  }

  /** GET /payouts?orderId= (listPayouts with orderId): the one payout of this orderId, or 404 not_found. */
  getPayoutByOrderId(orderId: string, options: CallOptions = {}): Promise<Payout> {
    return this.call({ method: 'GET', path: '/payouts', holds: NUMBER_ID, query: { orderId }, repeatable: true, signal: options.signal });
  }

  /** Every payout that matches `query`, newest first, page after page. */
  iteratePayouts(query: Omit<ListPayoutsQuery, 'cursor'> = {}, options: CallOptions = {}): AsyncGenerator<Payout, void, undefined> {
    return everyItem((q) => this.listPayouts(q, options), query);
  }

  /** GET /events (listEvents): one page of the project's webhook events, each with its deliveryStatus. */
  listEvents(query: ListEventsQuery = {}, options: CallOptions = {}): Promise<EventList> {
    return this.call({ method: 'GET', path: '/events', holds: ITEMS, query, repeatable: true, signal: options.signal });
  }

  /** Every event that matches `query` (e.g. `{deliveryStatus: 'failing'}`: what a receiver missed), the last queued first. */
  iterateEvents(query: Omit<ListEventsQuery, 'cursor'> = {}, options: CallOptions = {}): AsyncGenerator<Event, void, undefined> {
    return everyItem((q) => this.listEvents(q, options), query);
  }

  /** GET /events/{id} (getEvent): the webhook's body. */
  async getEvent(id: string, options: CallOptions = {}): Promise<WebhookEvent> {
    return this.call({ method: 'GET', path: `/events/${segment('id', id)}`, holds: ID, repeatable: true, signal: options.signal });
  }

  /** GET /balance/transactions (listBalanceTransactions): one page (JSON). */
  listBalanceTransactions(query: ListBalanceTransactionsQuery = {}, options: CallOptions = {}): Promise<BalanceTransactionList> {
    return this.call({ method: 'GET', path: '/balance/transactions', holds: ITEMS, query, repeatable: true, signal: options.signal });
  }

  /** Every movement of the balance that matches `query` (e.g. `{payoutId}`), newest first. */
  iterateBalanceTransactions(
    query: Omit<ListBalanceTransactionsQuery, 'cursor'> = {},
    options: CallOptions = {},
  ): AsyncGenerator<BalanceTransaction, void, undefined> {
    return everyItem((q) => this.listBalanceTransactions(q, options), query);
  }

  /** GET /payouts/{id} (getPayout). */
  getPayout(id: number, options: CallOptions = {}): Promise<Payout> {
    return this.call({ method: 'GET', path: `/payouts/${encodeURIComponent(String(id))}`, holds: NUMBER_ID, repeatable: true, signal: options.signal });
  }

  // The wire ----------------------------------------------------------------

  /**
   * An X-Timestamp never used before with this body (by its SHA-256): the clock's second,
   * else, after waiting for it, the next one not used yet; never a second ahead of the clock
   * (MAX_TIMESTAMP_LEAD_SECONDS). The signature covers only `<timestamp>.<body>` and each is
   * accepted once, so two requests with the same body (every GET has an empty one) must not
   * share a second: one GET per second per key. Every timestamp used stays used, whatever
   * the gateway answered and however the clock was corrected since (a request may still be
   * in flight), until it lies behind the gateway's window, where it would be refused anyway.
   */
  private async uniqueTimestamp(body: string, pause: (ms: number) => Promise<void>): Promise<number> {
    // A clock that did not move across a wait (an injected one) still gets a later second each time: no endless loop.
    let notBefore = -Infinity;
    for (;;) {
      const ms = this.now();
      const local = Math.max(Math.floor(ms / 1000), notBefore);
      const timestamp = local + this.memory.offsetSeconds;
      const byBody = this.memory.used;
      let used = byBody.get(body);
      if (!used) byBody.set(body, (used = new Set()));
      if (!used.has(timestamp)) {
        used.add(timestamp);
        const behind = timestamp - GATEWAY_WINDOW_SECONDS;
        if (used.size > 600) for (const t of used) if (t < behind) used.delete(t);
        if (byBody.size > 1000) for (const [key, times] of byBody) if (Math.max(...times) < behind) byBody.delete(key);
        return timestamp;
      }
      // Used: wait for the clock's next second rather than take one ahead of it.
      await pause(local > Math.floor(ms / 1000) ? 1000 : 1000 - (((ms % 1000) + 1000) % 1000));
      notBefore = local + 1;
    }
  }

  private async authHeaders(rawBody: string, bodyKey: string, pause: (ms: number) => Promise<void>): Promise<Record<string, string>> {
    if ('secretKey' in this.#auth) return { authorization: `Bearer ${this.#auth.secretKey}` };
    const timestamp = await this.uniqueTimestamp(bodyKey, pause);
    return {
      'x-public-id': this.#auth.publicId,
      'x-timestamp': String(timestamp),
      'x-signature': signRequest(this.#auth.signingSecret, timestamp, rawBody),
    };
  }

  private async call<T>(spec: CallSpec): Promise<T> {
    return (await this.exchange<T>(spec)).body;
  }

  /**
   * The Idempotency-Key of a refund or payout: the one given, else a new one; refused (a TypeError, nothing sent) when
   * none came (a newIdempotencyKey that forgot its return), since the call is retried on the strength of it. What a
   * header cannot carry is refused where the headers are made.
   */
  private keyOf(options: PostOptions): string {
    const key: unknown = options.idempotencyKey ?? this.newIdempotencyKey();
    if (typeof key !== 'string' || key === '')
      throw new TypeError(
        `idempotencyKey (or newIdempotencyKey's result): a non-empty string, got ${key === '' ? 'an empty one' : typeof key}. Nothing was sent`,
      );
    return key;
  }

  private async exchange<T>(spec: CallSpec): Promise<Answer<T>> {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(spec.query ?? {})) if (value !== undefined) search.set(name, String(value));
    const url = `${this.baseUrl}${spec.path}${search.size > 0 ? `?${search}` : ''}`;
    const rawBody = spec.body === undefined ? '' : JSON.stringify(spec.body);
    const bodyKey = createHash('sha256').update(rawBody).digest('base64');
    const request = `${spec.method} ${spec.path}`;
    // Sent on every attempt, and named by the error once they run out: the caller repeats the call with it.
    const key = spec.idempotencyKey;
    let retries = 0;
    let clockCorrected = false;
    let signedAgain = 0;
    let attempts = 0;
    // The caller's signal: nothing more is sent or waited for once it aborts.
    const { signal } = spec;
    let sent = 0;
    // Sticky across the attempts of a POST: once one may have acted (no answer, a proxy's page, a marked 503, the key's
    // first request still running), a later answer that says nothing was done speaks only for itself.
    let mayHaveActed = false;
    const aborted = () => {
      const unknown = spec.method === 'POST' && mayHaveActed;
      const said = sent === 0 ? '; nothing was sent' : spec.method === 'POST' ? '; every answer said nothing was done' : '';
      const message = `${request}: aborted by the caller's signal${unknown ? outcomeUnknown(spec) : said}`;
      return new PaymentGatewayAbortError(message, request, sent, { cause: signal?.reason, idempotencyKey: key, outcomeUnknown: unknown });
    };
    const pause = async (ms: number): Promise<void> => {
      if (signal === undefined) return this.sleep(ms);
      if (signal.aborted) throw aborted();
      let stop = () => {};
      const stopped = new Promise<'aborted'>((resolve) => {
        stop = () => resolve('aborted');
        signal.addEventListener('abort', stop, { once: true });
      });
      try {
        if ((await Promise.race([this.sleep(ms, signal), stopped])) === 'aborted') throw aborted();
      } finally {
        signal.removeEventListener('abort', stop);
      }
    };
    for (;;) {
      if (signal?.aborted) throw aborted();
      attempts++;
      // Signed anew on every attempt: the gateway accepts each signature once.
      const headers: Record<string, string> = { accept: 'application/json', ...(await this.authHeaders(rawBody, bodyKey, pause)) };
      if (spec.body !== undefined) headers['content-type'] = 'application/json';
      if (key !== undefined) headers['idempotency-key'] = key;
      // A value HTTP cannot carry is the caller's mistake, found before anything is sent: not a network failure to retry.
      // Named, never shown: a header may carry a secret (authorization).
      for (const [name, value] of Object.entries(headers)) {
        if (!/^[\t\x20-\x7e\x80-\xff]*$/.test(value)) {
          throw new TypeError(`${request}: the ${name} header cannot carry its value (Latin-1 text without control characters); nothing was sent`);
        }
      }
      const context = { retriesSoFar: retries, maxRetries: this.maxRetries, repeatable: spec.repeatable };

      let status: number;
      let text: string;
      let response: Response;
      if (signal?.aborted) throw aborted();
      // The attempt's own controller, ended by its timeout or the caller's signal, whose listener goes with the attempt
      // (AbortSignal.any would keep every attempt's signal in a long-lived caller signal for good).
      const attempt = new AbortController();
      const timer = setTimeout(() => attempt.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), this.timeoutMs);
      const callerAborted = () => attempt.abort(signal?.reason);
      signal?.addEventListener('abort', callerAborted, { once: true });
      try {
        sent++;
        // A redirect is not followed: the API answers none, and fetch would send a POST's redirect on as a GET and return
        // what that answers (a list) as the create's answer.
        const init = { method: spec.method, headers, body: spec.body === undefined ? undefined : rawBody, signal: attempt.signal, redirect: 'manual' } as const;
        response = await this.fetch(url, init);
        status = response.status;
        text = await response.text();
      } catch (cause) {
        clearTimeout(timer);
        signal?.removeEventListener('abort', callerAborted);
        // Sent without an answer (lost, timed out, or cut by the caller's signal): it may have acted.
        mayHaveActed = true;
        if (signal?.aborted) throw aborted();
        const delay = retryDelayMs({ kind: 'network' }, context);
        if (delay === null) {
          const message = `${request}: no answer from the gateway (${(cause as Error).message})${outcomeUnknown(spec)}`;
          throw new PaymentGatewayConnectionError(message, request, attempts, { cause, idempotencyKey: key, outcomeUnknown: spec.method === 'POST' });
        }
        await pause(delay);
        retries++;
        continue;
      }
      clearTimeout(timer);
      signal?.removeEventListener('abort', callerAborted);
      if (status < 400) {
        // Every operation answers a JSON object holding its resource, with a 2xx status the spec gives it (none a 2xx without
        // a body, none a 3xx): anything else did not come from the gateway as it is (a proxy's page or JSON, a redirect), and
        // what a POST did is unknown.
        const answer = jsonObjectOf(text);
        const expected = status >= 200 && status < 300 && (spec.statuses ?? [200]).includes(status);
        if (expected && answer !== undefined && holds(answer, spec.holds)) {
          return { body: answer as T, status, replayed: response.headers.get('idempotent-replayed') === 'true', attempts };
        }
        const requestId = response.headers.get('x-request-id') ?? undefined;
        const message = unexpectedAnswerMessage(spec, request, response, text, answer !== undefined);
        const unknown = spec.method === 'POST';
        throw new PaymentGatewayError(status, 'unexpected_response', message, undefined, undefined, request, attempts, undefined, requestId, key, unknown);
      }

      const error = errorOf(text, status);
      const retryAfterSeconds = parseRetryAfter(response.headers.get('retry-after'), response.headers.get('date'), this.now());
      // A clock off by more than the window: take the gateway's time once and sign again (nothing ran).
      if (status === 401 && error.code === 'timestamp_invalid' && !('secretKey' in this.#auth) && !clockCorrected) {
        const serverSeconds = serverTimeOf(response.headers);
        if (serverSeconds !== undefined) {
          this.memory.offsetSeconds = serverSeconds - Math.floor(this.now() / 1000);
          this.memory.learnt = true;
          clockCorrected = true;
          continue;
        }
      }
      // The same signature already used by another process of this key (same second, same body; param X-Timestamp): signed
      // again in a second not used yet, which uniqueTimestamp waits for (the refused one stays used), a few times. A signature
      // that does not match (param X-Signature: a wrong secret) is thrown at once: each repeat would be one more failed
      // authentication of the address, counted toward its lockout.
      const reused = error.code === 'signature_invalid' && error.param === 'X-Timestamp';
      if (status === 401 && reused && !('secretKey' in this.#auth) && signedAgain < SIGNATURE_RETRIES) {
        signedAgain++;
        continue;
      }
      // A proxy's 502, 504 or other 5xx page, a 503 marked as maybe written, a 500 (an unexpected error: the gateway keeps
      // the key, not knowing what it wrote), or the key's first request still running (409 idempotency_key_in_use: an
      // earlier attempt of this call, or a call before it): the gateway may have acted.
      if (unansweredOnTheWay(status, error.code) || status === 500 || markedMaybeWritten(status, error.message) || keyStillRunning(status, error.code))
        mayHaveActed = true;
      const outcome: AttemptOutcome = { kind: 'answer', status, code: error.code, retryAfterSeconds };
      const delay = retryDelayMs(outcome, context);
      if (delay === null) {
        const requestId = response.headers.get('x-request-id') ?? undefined;
        const unknown = spec.method === 'POST' && mayHaveActed;
        const message = `${error.message}${unknown ? outcomeUnknown(spec) : ''}`;
        const { param, details } = error;
        throw new PaymentGatewayError(status, error.code, message, param, details, request, attempts, retryAfterSeconds, requestId, key, unknown);
      }
      await pause(delay);
      retries++;
    }
  }
}

/**
 * What the clients signing with one secret for one gateway share (a project's test and
 * live keys share its secret): the offset learnt from its clock, and the timestamps used.
 */
interface SigningMemory {
  offsetSeconds: number;
  /** The offset was learnt from the gateway's clock. */
  learnt: boolean;
  /** Per body (its SHA-256), the X-Timestamps used with it: uniqueTimestamp. */
  readonly used: Map<string, Set<number>>;
}

const newSigningMemory = (): SigningMemory => ({ offsetSeconds: 0, learnt: false, used: new Map() });

/**
 * Per secret and gateway (by their SHA-256; the address as URL writes it), the memory of
 * the clients alive: each client holds its own, the map only finds it for the next one,
 * and forgets it once no client holds it (a rotated secret's).
 */
const SIGNING_MEMORY = new Map<string, WeakRef<SigningMemory>>();
const FORGET = new FinalizationRegistry<string>((key) => {
  if (SIGNING_MEMORY.get(key)?.deref() === undefined) SIGNING_MEMORY.delete(key);
});

function memoryOf(secret: string, baseUrl: string): SigningMemory {
  const key = createHash('sha256')
    .update(`${secret}\n${new URL(baseUrl).href}`)
    .digest('base64');
  const known = SIGNING_MEMORY.get(key)?.deref();
  if (known) return known;
  const memory = newSigningMemory();
  SIGNING_MEMORY.set(key, new WeakRef(memory));
  FORGET.register(memory, key);
  return memory;
}

/**
 * The base address, built from the parsed URL: its origin and path without trailing slashes; http(s), ending in the
 * version `/v1`. Without it every path is the gateway's 404, which getPayoutByOrderId would take for "no payout of this
 * orderId". Refused rather than mended, as each would send requests elsewhere: a space, tab or line break anywhere (read
 * with it from a file?), a `?` or `#` even empty, an empty path segment (`//v1`), a user or password.
 */
function checkBaseUrl(baseUrl: unknown): string {
  const example = "an http(s) address ending in the API's version /v1, e.g. https://pay.example.com/v1";
  if (typeof baseUrl === 'string' && (/\s/.test(baseUrl) || /[^\x20-\x7e\u0080-\uffff]/.test(baseUrl))) {
    throw new TypeError(`baseUrl: ${example}; it holds a space, tab or line break (read with it from a file?)`);
  }
  let url: URL | undefined;
  try {
    url = typeof baseUrl === 'string' && /^https?:\/\//i.test(baseUrl) ? new URL(baseUrl) : undefined;
  } catch {
    url = undefined;
  }
  if (url === undefined) throw new TypeError(`baseUrl: ${example}`);
  const path = url.pathname.replace(/(?<!\/)\/+$/, '');
  // Shown without a query, a fragment or a user and password: the address alone.
  const shown = `${url.origin}${url.pathname}`;
  if (/[?#]/.test(baseUrl as string)) throw new TypeError(`baseUrl: ${example}; got ${shown} (with a query or fragment)`);
  if (!/\/v1$/.test(path)) throw new TypeError(`baseUrl: ${example}; got ${shown}`);
  if (path.split('/').slice(1).includes('')) throw new TypeError(`baseUrl: ${example}; got ${shown} (an empty path segment)`);
  if (url.username !== '' || url.password !== '') throw new TypeError(`baseUrl: ${example}; got ${shown} (with a user or password)`);
  return `${url.origin}${path}`;
}

/**
 * A key the client sends in a header (the secret key in Authorization, the public id in
 * X-Public-Id): printable ASCII, no space. A line break read with it from a file or an
 * environment variable is refused here, by name: the value is never put in an error.
 */
function checkCredential(name: string, value: unknown): void {
  if (typeof value !== 'string' || value === '') throw new TypeError(`${name}: a non-empty string`);
  if (/^\s|\s$/.test(value)) throw new TypeError(`${name}: starts or ends with a space or a line break (read with it from a file?); the value is not shown`);
  if (!/^[\x21-\x7e]+$/.test(value)) {
    throw new TypeError(`${name}: only printable ASCII without spaces can be sent in a header; the value is not shown`);
  }
}

/**
 * An id as one segment of the path, refused (a TypeError naming the argument, nothing sent) when empty or `.` or `..`:
 * URL reads those as dot segments, another address, whose route's 404 or 405 would pass for the resource's.
 */
function segment(name: string, id: unknown): string {
  if (typeof id !== 'string' || id === '' || id === '.' || id === '..') {
    throw new TypeError(`${name}: an id (a non-empty string other than "." and ".."), got ${typeof id === 'string' ? JSON.stringify(id) : String(id)}`);
  }
  return encodeURIComponent(id);
}

/** A create's outcome: made by this answer (a 201 or 202 that is not a replay), or already there. */
function creation(answer: Answer<unknown>): Creation {
  return { created: answer.status !== 200 && !answer.replayed, attempts: answer.attempts };
}

/** Every item of a cursor-paged list, page after page (each nextCursor). */
async function* everyItem<Q extends { cursor?: string }, T>(
  list: (query: Q) => Promise<{ items: T[]; nextCursor?: string | null; hasMore: boolean }>,
  query: Omit<Q, 'cursor'>,
): AsyncGenerator<T, void, undefined> {
  let cursor: string | undefined;
  do {
    const page = await list({ ...query, ...(cursor === undefined ? {} : { cursor }) } as Q);
    yield* page.items;
    cursor = page.hasMore && page.nextCursor ? page.nextCursor : undefined;
  } while (cursor !== undefined);
}

/** The answer's JSON object, or undefined: not JSON (a proxy's page), empty, or JSON that is not an object. */
function jsonObjectOf(text: string): object | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The answer holds the operation's field with its JSON type. */
function holds(answer: object, [field, type]: Holds): boolean {
  const value: unknown = Object.hasOwn(answer, field) ? (answer as Record<string, unknown>)[field] : undefined;
  return type === 'array' ? Array.isArray(value) : typeof value === type;
}

/** What an answer below 400 that is not the operation's says (for a POST, with outcomeUnknown). */
function unexpectedAnswerMessage(spec: CallSpec, request: string, response: Response, text: string, json: boolean): string {
  const { status } = response;
  const shown = text.slice(0, 200);
  const statuses = spec.statuses ?? [200];
  const why =
    status < 200 || status >= 300
      ? `, a redirect (to ${response.headers.get('location') ?? 'nowhere'}), not followed: the API answers none`
      : !statuses.includes(status)
        ? `, a status this operation never answers (only ${statuses.join(' or ')}): ${shown}`
        : text === ''
          ? ' with an empty body'
          : json
            ? ` with JSON that is not this operation's answer (no ${spec.holds[1]} ${spec.holds[0]}): ${shown}`
            : ` with an answer that is not the API's JSON: ${shown}`;
  return `${request}: HTTP ${status}${why}${outcomeUnknown(spec)}`;
}

/**
 * For a POST without a readable answer (none came, or not the API's JSON): that its outcome
 * is unknown (the gateway may have acted) and how to learn it safely: the same call again,
 * under the same orderId (POST /invoices) or Idempotency-Key. A new key could act twice.
 */
function outcomeUnknown(spec: CallSpec): string {
  if (spec.method !== 'POST') return '';
  const same =
    spec.path === '/invoices' && spec.idempotencyKey === undefined
      ? `orderId ${String((spec.body as { orderId?: unknown } | undefined)?.orderId)}`
      : `Idempotency-Key ${String(spec.idempotencyKey)}`;
  return `. The outcome is unknown: the gateway may have acted. Make the same call with the same ${same} to learn it (a repeat cannot act twice)`;
}

/** A proxy's answer that the gateway did not answer in time (502, 504) or another 5xx not in the API's error shape. */
function unansweredOnTheWay(status: number, code: string): boolean {
  return status === 502 || status === 504 || (status >= 500 && code === 'unexpected_response');
}

/** 409 idempotency_key_in_use: a request with this Idempotency-Key is still running, and may act. */
function keyStillRunning(status: number, code: string): boolean {
  return status === 409 && code === 'idempotency_key_in_use';
}

/**
 * A 503 whose write may have been done: the gateway marks it (and nginx's for a write a
 * replica got) only in its message, with MAYBE_WRITTEN_MARK (docs/api.md, "What is safe to
 * retry"); its unmarked 503s wrote nothing.
 */
function markedMaybeWritten(status: number, message: string): boolean {
  return status === 503 && message.includes(MAYBE_WRITTEN_MARK);
}

/** The error object of an answer; a body not in the spec's shape (a proxy's page) gets code `unexpected_response`. */
function errorOf(text: string, status: number): { code: string; message: string; param?: string; details?: ErrorDetail[] } {
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; param?: unknown; details?: unknown } };
    const e = parsed.error;
    if (e && typeof e.code === 'string') {
      return {
        code: e.code,
        message: typeof e.message === 'string' ? e.message : '',
        ...(typeof e.param === 'string' ? { param: e.param } : {}),
        ...(Array.isArray(e.details) ? { details: e.details as ErrorDetail[] } : {}),
      };
    }
  } catch {
    // not JSON
  }
  return { code: 'unexpected_response', message: `HTTP ${status}: ${text.slice(0, 200)}` };
}

/** The gateway's clock: X-Server-Time (unix seconds, sent with timestamp_invalid), else the Date header. */
function serverTimeOf(headers: Headers): number | undefined {
  const stated = headers.get('x-server-time');
  if (stated !== null && /^\d{1,12}$/.test(stated)) return Number(stated);
  const date = headers.get('date');
  const ms = date === null ? NaN : Date.parse(date);
  return Number.isNaN(ms) ? undefined : Math.floor(ms / 1000);
}
