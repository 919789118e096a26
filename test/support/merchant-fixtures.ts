/**
 * End-to-end helpers for the merchant API: a started gateway on a fresh database, a
 * tiny HTTP client, the operator calls that set merchants up, polling for the read
 * models, and the wire formats of the spec.
 */
import { randomUUID } from 'node:crypto';
import { RunningGateway, startGateway } from './gateway-process';
import { createTestDatabase, TestDatabase } from './test-database';

// Response bodies are whatever the gateway sent; the tests assert their shape.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface Reply {
  readonly status: number;
  readonly body: Json;
  readonly headers: Headers;
}

export interface Client {
  get(path: string): Promise<Reply>;
  post(path: string, body?: unknown): Promise<Reply>;
  patch(path: string, body?: unknown): Promise<Reply>;
  /** A request with the body sent verbatim (bad JSON, odd headers). */
  raw(method: string, path: string, init?: { body?: string; headers?: Record<string, string> }): Promise<Reply>;
}

/** `api(baseUrl, token)`: JSON over HTTP with `Authorization: Bearer <token>` (none without a token). */
export function api(baseUrl: string, token?: string): Client {
  const auth: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
  const send = async (method: string, path: string, body: string | undefined, headers: Record<string, string>): Promise<Reply> => {
    const response = await fetch(`${baseUrl}${path}`, { method, headers, body });
    const text = await response.text();
    let parsed: Json = text;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: response.status, body: parsed, headers: response.headers };
  };
  const json = (method: string) => (path: string, body?: unknown) =>
    send(method, path, body === undefined ? undefined : JSON.stringify(body), {
      ...auth,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    });
  return {
    get: (path) => send('GET', path, undefined, auth),
    post: json('POST'),
    patch: json('PATCH'),
    raw: (method, path, init = {}) => send(method, path, init.body, init.headers ?? {}),
  };
}

export type Mode = 'test' | 'live';

export interface ProjectSetup {
  readonly name?: string;
  readonly status?: 'active' | 'pending' | 'rejected' | 'blocked';
  readonly usdtEnabled?: boolean;
  readonly holdHours?: number;
  readonly customerFeeShare?: number;
  readonly methods?: Record<string, Record<string, unknown>>;
}

/** A project of its own account with a merchant client per mode. */
export interface Merchant {
  readonly accountId: string;
  readonly projectId: string;
  /** The POST /admin/v1/projects answer (with the keys). */
  readonly project: Json;
  readonly keys: Record<Mode, { secretKey: string; publicKey: string }>;
  readonly test: Client;
  readonly live: Client;
}

/** The operator API (Bearer ADMIN_TOKEN) as the tests use it. */
export class Operator {
  readonly http: Client;

  constructor(
    readonly baseUrl: string,
    adminToken: string,
  ) {
    this.http = api(baseUrl, adminToken);
  }

  async createAccount(name = 'ООО Ромашка'): Promise<string> {
    const r = await this.http.post('/admin/v1/accounts', { name, email: `owner-${randomUUID()}@example.com` });
    expectStatus(r, 201);
    return r.body.id as string;
  }

  async createProject(accountId: string, setup: ProjectSetup = {}): Promise<Json> {
    const r = await this.http.post('/admin/v1/projects', { accountId, name: setup.name ?? 'Магазин', ...setup });
    expectStatus(r, 201);
    return r.body;
  }

  /** A new account with one project; `accountId` reuses an existing account instead. */
  async merchant(setup: ProjectSetup = {}, accountId?: string): Promise<Merchant> {
    const account = accountId ?? (await this.createAccount());
    const project = await this.createProject(account, setup);
    return this.clientsOf(account, project, project.keys);
  }

  clientsOf(accountId: string, project: Json, keys: Merchant['keys']): Merchant {
    return {
      accountId,
      projectId: project.id,
      project,
      keys,
      test: api(this.baseUrl, keys.test.secretKey),
      live: api(this.baseUrl, keys.live.secretKey),
    };
  }

  async patchProject(projectId: string, body: Record<string, unknown>): Promise<Json> {
    const r = await this.http.patch(`/admin/v1/projects/${projectId}`, body);
    expectStatus(r, 200);
    return r.body;
  }

  /** The acquirer's answer for an invoice: the raw reply (200 with the invoice, or an error). */
  payment(invoiceId: string, outcome: 'paid' | 'failed', method?: string): Promise<Reply> {
    return this.http.post(`/admin/v1/invoices/${invoiceId}/payment`, method === undefined ? { outcome } : { outcome, method });
  }

  /** CLOCK=manual only: moves the gateway clock and answers its new time. */
  async advance(seconds: number): Promise<Date> {
    const r = await this.http.post('/admin/v1/clock/advance', { seconds });
    expectStatus(r, 200);
    return new Date(r.body.now);
  }
}

/** A gateway (API + projector + workers; `start:api` alone with entry 'api') on a fresh migrated database of its own. */
export interface InvoiceGateway {
  readonly gateway: RunningGateway;
  readonly db: TestDatabase;
  readonly operator: Operator;
  readonly baseUrl: string;
  close(): Promise<void>;
}

/**
 * The operator token of the fixture's gateways: set, not generated and printed as by `npm start`, so that a second
 * process and the test's own calls share it (the generated one: gateway-process.spec.ts, readme-first-request.spec.ts).
 */
export const ADMIN_TOKEN = 'operator-token-for-invoice-tests-0042';

/** `serverOfItsOwn`: its database on a private server, for a file that holds the cluster's horizon (test-database.ts says why). */
export async function startInvoiceGateway(
  env: Record<string, string> = {},
  entry: 'gateway' | 'api' = 'gateway',
  database: { serverOfItsOwn?: boolean } = {},
): Promise<InvoiceGateway> {
  const db = await createTestDatabase({ poolSize: 2, serverOfItsOwn: database.serverOfItsOwn });
  let gateway: RunningGateway;
  try {
    gateway = await startGateway(entry, { DATABASE_URL: db.url, ADMIN_TOKEN, ...env });
  } catch (error) {
    await db.drop();
    throw error;
  }
  return {
    gateway,
    db,
    baseUrl: gateway.baseUrl,
    operator: new Operator(gateway.baseUrl, gateway.adminToken),
    async close() {
      await gateway.kill();
      await db.drop();
    },
  };
}

/** Fails with the whole reply in the message, so a wrong status says why. */
export function expectStatus(reply: Reply, status: number): void {
  if (reply.status !== status) {
    throw new Error(`expected HTTP ${status}, got ${reply.status}: ${JSON.stringify(reply.body)}`);
  }
}

/** The spec's error: status, code and (when given) param, with a Russian message. */
export function expectError(reply: Reply, status: number, code: string, param?: string): void {
  expect({ status: reply.status, code: reply.body?.error?.code, ...(param === undefined ? {} : { param: reply.body?.error?.param }) }).toEqual({
    status,
    code,
    ...(param === undefined ? {} : { param }),
  });
  expect(reply.body.error.message).toMatch(CYRILLIC);
}

/** A gateway's JSON log lines that carry `text` (a request id), parsed. */
export const logLinesWith = (gateway: { output(): string }, text: string): Json[] =>
  gateway
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{') && l.includes(text))
    .map((l) => JSON.parse(l) as Json);

/** Calls `read` until `done` holds on its answer (the read models are fed asynchronously). */
export async function poll<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(value)}`);
    await sleep(50);
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Every item of GET /invoices (all pages) with the given query. */
export async function listAll(client: Client, query = '', limit = 100): Promise<Json[]> {
  const items: Json[] = [];
  let cursor: string | null = null;
  do {
    const sep: string = query === '' ? '' : '&';
    const path = `/v1/invoices?limit=${limit}${sep}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    let r: Reply = await client.get(path);
    // As the spec tells a client: a 429 (the key's 60 per second, which a poll shares with the test's other requests) waits its Retry-After.
    for (let retries = 0; r.status === 429 && retries < 5; retries++) {
      await sleep(Number(r.headers.get('retry-after') ?? '1') * 1000);
      r = await client.get(path);
    }
    expectStatus(r, 200);
    items.push(...r.body.items);
    cursor = r.body.nextCursor;
  } while (cursor);
  return items;
}

/** Waits until the invoice list of `client` contains every id (the projection caught up). */
export async function waitForList(client: Client, ids: readonly string[], query = ''): Promise<Json[]> {
  return poll(
    () => listAll(client, query),
    (items) => ids.every((id) => items.some((i: Json) => i.id === id)),
    `the invoice list to contain ${ids.length} invoice(s)`,
  );
}

/** A fresh orderId. */
export const orderId = (prefix = 'order') => `${prefix}-${randomUUID()}`;

export const MONEY = /^\d+\.\d{2}$/;
export const PERCENT = /^\d+\.\d{2,4}$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;
export const CYRILLIC = /[А-Яа-яЁё]/;
