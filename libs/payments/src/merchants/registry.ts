import { randomBytes, randomUUID } from 'node:crypto';
import type { CustomTypesConfig, Pool } from 'pg';
import { types } from 'pg';
import { parseTimestamptz } from '#event-store/postgres';
import { countRequestInWindow, PollMarkRequest, PollMarkResult, rateWindowOf, takePollMark } from '../access/access-control';
import { inTransaction, OneTurnBatches, outcomeOf, preparedStatement, writeStatement } from '#platform/database';
import { MethodOverrides, projectMethods, MethodTerms } from '#domain';
import type { Mode } from '#domain';
import { SecretBox } from '#platform/secrets';
import { openWebhookSecret, UnopenableWebhookSecretError, webhookSecretOwner } from './webhook-secrets';
import { batchedLookupParameters, batchedLookupStatement, batchesByPollInterval, SecretKeyLookup, SecretKeyLookupRequest } from './secret-key-lookups';
import { KeyTags } from './key-tags';
import { CredentialMemory } from '../access/credential-memory';
import { hashSecretKey, INSERT_ACCOUNT, issueKeys, ProjectRow, projectColumnsOf, recordWebhookSettings, settingsParams, toProject } from './project-rows';

export const PROJECT_STATUSES = ['active', 'pending', 'rejected', 'blocked'] as const;
export type ProjectStatus = (typeof PROJECT_STATUSES)[number];
export const WEBHOOK_EVENTS = [
  'invoice.paid',
  'invoice.failed',
  'invoice.expired',
  'refund.succeeded',
  'refund.failed',
  'payout.paid',
  'payout.rejected',
] as const;
export type WebhookEventKind = (typeof WEBHOOK_EVENTS)[number];

export interface Account {
  readonly id: string;
  readonly name: string;
  readonly email: string;
  readonly createdAt: Date;
}

export interface Project extends ProjectSettings {
  readonly id: string;
  readonly accountId: string;
  /**
   * The webhook secret as stored, sealed (webhook-secrets.ts): opened only where it is
   * used (Registry.webhookSecretOf), so a secret that does not open stops the HMAC
   * requests and the webhooks of its project, not its Bearer requests.
   */
  readonly sealedWebhookSecret: string;
  readonly idNamespace: string;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /** When the webhook endpoint was disabled for failing (endpoint-health.ts), or null. */
  readonly webhookDisabledAt?: Date | null;
}

export interface KeyPair {
  readonly secretKey: string;
  readonly publicKey: string;
}

export interface ProjectSettings {
  readonly name: string;
  readonly status: ProjectStatus;
  readonly webhookUrl: string | null;
  readonly webhookEvents: readonly WebhookEventKind[];
  readonly usdtEnabled: boolean;
  readonly holdHours: number;
  readonly methodOverrides: MethodOverrides;
  readonly customerFeeShare: number;
}

/**
 * The advisory lock of the first start's sandbox: its own key. It was the log checkpoints' (CHECKPOINT_LOCK), so an
 * API starting while a checkpoint was extended waited for it, and past its statement timeout did not start.
 */
const SANDBOX_LOCK = 7_261_903_186;

/** The sandbox project a first start makes on an empty database (Registry.createSandboxIfEmpty). */
export const SANDBOX_PROJECT: ProjectSettings = {
  name: 'Sandbox project',
  status: 'active',
  webhookUrl: null,
  webhookEvents: [...WEBHOOK_EVENTS],
  usdtEnabled: true,
  // No hold: a newcomer refunds the first payment at once (decision 0155).
  holdHours: 0,
  methodOverrides: {},
  customerFeeShare: 100,
};

/** Who a merchant request is: the project and mode its key selects. */
export interface MerchantIdentity {
  readonly project: Project;
  readonly mode: Mode;
  readonly keyId: string;
}

export { hashSecretKey } from './project-rows';

const token = (bytes: number) => randomBytes(bytes).toString('base64url');

export const methodsOf = (project: Project): MethodTerms[] => projectMethods(project.methodOverrides, project.usdtEnabled);

/**
 * Webhook secrets opened, by their sealed form and owner: every HMAC lookup reads its
 * project's row, and opening the same sealed value (AES-256-GCM) always gives the same
 * secret. A secret replaced or sealed again by a rotation is another sealed value, so
 * what is kept never stands for the stored one; the oldest are forgotten past `max`.
 */
class OpenedWebhookSecrets {
  private readonly opened = new Map<string, string>();

  constructor(
    private readonly secrets: SecretBox,
    private readonly max = 10_000,
  ) {}

  open(stored: string, projectId: string): string {
    const key = `${projectId} ${stored}`;
    let secret = this.opened.get(key);
    if (secret === undefined) {
      secret = openWebhookSecret(stored, projectId, this.secrets);
      this.opened.set(key, secret);
      if (this.opened.size > this.max) this.opened.delete(this.opened.keys().next().value!);
    }
    return secret;
  }
}

/** Where and what a project's webhooks go: the part of its settings history keeps (project_webhook_settings). */
export type WebhookSettings = Pick<ProjectSettings, 'webhookUrl' | 'webhookEvents'>;

/** A project's webhook settings at an instant; `existed`: the project had them by then. */
export type WebhookSettingsAt = WebhookSettings & { readonly existed: boolean };

/** What a Bearer key's lookup found: who is calling, the request's count in its rate window, the poll mark's result (null: none asked). */
export interface CountedLookup {
  readonly identity: MerchantIdentity;
  readonly hits: number;
  readonly poll: PollMarkResult | null;
}

const BATCHED_LOOKUP = batchedLookupStatement(projectColumnsOf('p'));

/** The Bearer lookups' types: their timestamps (the project's, the poll mark's) by parseTimestamptz, the rest as the pool reads them. */
const LOOKUP_TYPES: CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === types.builtins.TIMESTAMPTZ ? parseTimestamptz : types.getTypeParser(oid, format)) as CustomTypesConfig['getTypeParser'],
};

/** The statement of a lookup alone in its turn: the key, its count and (for a read) its poll mark. */
function singleLookup(lookup: SecretKeyLookupRequest) {
  const { pollMark } = lookup;
  const found = `key AS (
         SELECT ${projectColumnsOf('p')}, k.id AS key_id, k.mode AS key_mode FROM api_keys k JOIN projects p ON p.id = k.project_id
         WHERE k.secret_key_hash = $1 AND k.revoked_at IS NULL AND k.mode = $3
       ), counted AS (${countRequestInWindow('SELECT key_id, $2::bigint, 1 FROM key')})`;
  const columns = `${projectColumnsOf('key')}, key.key_id, key.key_mode, counted.hits`;
  const parameters: unknown[] = [lookup.secretKeyHash, lookup.windowSecond, lookup.mode];
  let text = `WITH ${found} SELECT ${columns} FROM key CROSS JOIN counted`;
  if (pollMark) {
    // The mark's earlier moment is read from the statement's snapshot: a mark taken
    // concurrently may be missing there, and the wait is then one whole interval.
    text = `WITH ${found}, marked AS (
         ${takePollMark('SELECT key.key_id, $4::text, $5::timestamptz FROM key CROSS JOIN counted WHERE counted.hits <= $7', '$6')} RETURNING 1
       )
       SELECT ${columns}, EXISTS (SELECT 1 FROM marked) AS poll_taken,
         (SELECT m.last_at FROM poll_marks m WHERE m.key_id = key.key_id AND m.resource = $4) AS poll_last_at
       FROM key CROSS JOIN counted`;
    parameters.push(pollMark.resource, pollMark.at, pollMark.intervalSeconds, pollMark.countedUpTo);
  }
  return preparedStatement(text, parameters);
}

/**
 * Merchant accounts, their projects and API keys. Configuration, not money: kept in
 * plain tables. Secret keys are shown once and stored only as SHA-256 hashes (they
 * are 192-bit random tokens, so a fast hash is enough); a rotation revokes the old
 * pair of that mode in the same transaction that creates the new one. Webhook
 * secrets (which the gateway needs in clear, to verify HMAC requests and to sign
 * webhooks) are stored sealed with the SecretBox (AES-256-GCM).
 */
/** How often an API process looks whether a webhook secret changed (Registry.followWebhookSecretChanges). */
export const WEBHOOK_SECRET_CHANGES_POLL_MS = 500;

export class Registry {
  private tags: Promise<KeyTags> | null = null;
  /**
   * What this process knows of secret keys (by hash) and public ids (with their
   * project's webhook secret) without asking: fed by the keys it issues and revokes,
   * by warmUpCredentials and by every lookup (CredentialMemory). The merchant guard
   * tells failing attempts apart with it; it never lets a request in by itself.
   */
  readonly knownSecretKeys = new CredentialMemory<true>();
  readonly knownPublicIds = new CredentialMemory<string>();
  /** webhook_secret_changes.generation when this process last looked (null: never). */
  private webhookSecretGeneration: string | null = null;
  private readonly openedWebhookSecrets: OpenedWebhookSecrets;

  constructor(
    private readonly pool: Pool,
    private readonly secrets: SecretBox,
  ) {
    this.openedWebhookSecrets = new OpenedWebhookSecrets(secrets);
  }

  /** Hashes of secret keys whose tag held (carriesSecretKeyTag), the oldest forgotten past 100,000. */
  private readonly taggedSecretKeys = new Map<string, true>();

  /**
   * Whether a secret key carries the tag of a key this gateway issued (KeyTags.isSecretKey),
   * given the key and its hash (hashSecretKey). The tag is an HMAC: a key whose tag held
   * once is remembered by its hash, which every lookup computes anyway. Says nothing of
   * whether the key is live: only its lookup does.
   */
  async carriesSecretKeyTag(secretKey: string, secretKeyHash: string): Promise<boolean> {
    if (this.taggedSecretKeys.has(secretKeyHash)) return true;
    const tagged = (await this.keyTags()).isSecretKey(secretKey);
    if (tagged) {
      this.taggedSecretKeys.set(secretKeyHash, true);
      if (this.taggedSecretKeys.size > 100_000) this.taggedSecretKeys.delete(this.taggedSecretKeys.keys().next().value!);
    }
    return tagged;
  }

  /** The tags every issued key carries (key-tags.ts), loaded once. */
  keyTags(): Promise<KeyTags> {
    this.tags ??= KeyTags.load(this.pool).catch((error: unknown) => {
      this.tags = null;
      throw error;
    });
    return this.tags;
  }

  /** A project's webhook secret in clear, from its stored form (the `webhook_secret` column, read with a webhook delivery). */
  openWebhookSecret(projectId: string, stored: string): string {
    return openWebhookSecret(stored, projectId, this.secrets);
  }

  /** The project's webhook secret in clear (HMAC checks, the operator's view); UnopenableWebhookSecretError when it does not open. */
  webhookSecretOf(project: Pick<Project, 'id' | 'sealedWebhookSecret'>): string {
    return this.openedWebhookSecrets.open(project.sealedWebhookSecret, project.id);
  }

  /** The secret opened, or null when it does not open (it is then opened, and refused naming the project, where it is used). */
  openedOrNull(projectId: string, stored: string): string | null {
    try {
      return this.openedWebhookSecrets.open(stored, projectId);
    } catch (error) {
      if (error instanceof UnopenableWebhookSecretError) return null;
      throw error;
    }
  }

  async createAccount(name: string, email: string, now: Date): Promise<Account> {
    const id = randomUUID();
    const account = { id, name, email, createdAt: now };
    // Its answer lost: the new id's row tells whether it was written. Not even that: its id was never told, and no
    // operator route lists accounts; the console's list does.
    return outcomeOf(
      async () => {
        await writeStatement(this.pool, INSERT_ACCOUNT, [id, name, email, now]);
        return account;
      },
      async () => ((await this.pool.query('SELECT 1 FROM accounts WHERE id = $1', [id])).rowCount === 1 ? account : null),
      `список мерчантов в консоли (/admin): есть ли там «${name}», созданный сейчас`,
    );
  }

  /**
   * On an empty database: one sandbox account with an active project, so a newcomer
   * can call the API at once. Returns its keys (the only time they are shown), or null
   * when the database already has accounts. Two processes starting at once create one.
   */
  async createSandboxIfEmpty(now: Date, settings: ProjectSettings = SANDBOX_PROJECT): Promise<{ project: Project; keys: Record<Mode, KeyPair> } | null> {
    const client = await this.pool.connect();
    try {
      await client.query('SELECT pg_advisory_lock($1)', [SANDBOX_LOCK]);
      const any = await client.query('SELECT 1 FROM accounts LIMIT 1');
      if (any.rowCount !== 0) return null;
      // The account in the project's transaction: a start that failed between the two left an account alone, and every
      // later start skipped the sandbox (its keys never printed).
      return await this.createProject(randomUUID(), settings, now, { name: 'Sandbox', email: 'sandbox@example.com' });
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [SANDBOX_LOCK]).catch(() => undefined);
      client.release();
    }
  }

  /** A project with its keys; with `newAccount`, the account `accountId` is made in the same transaction. */
  async createProject(
    accountId: string,
    settings: ProjectSettings,
    now: Date,
    newAccount?: { readonly name: string; readonly email: string },
  ): Promise<{ project: Project; keys: Record<Mode, KeyPair> }> {
    // Before the transaction: loading the tags may take a connection of its own.
    const tags = await this.keyTags();
    const id = randomUUID();
    let made: { project: Project; keys: Record<Mode, KeyPair> } | null = null;
    const write = () =>
      inTransaction(this.pool, async (tx) => {
        if (newAccount) await tx.query(INSERT_ACCOUNT, [accountId, newAccount.name, newAccount.email, now]);
        const row = await tx.query<ProjectRow>(
          `INSERT INTO projects (id, account_id, name, status, webhook_url, webhook_events, usdt_enabled, hold_hours, methods,
           customer_fee_share, webhook_secret, id_namespace, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13) RETURNING *`,
          [id, accountId, ...settingsParams(settings), this.newWebhookSecret(id).sealed, randomUUID(), now],
        );
        await recordWebhookSettings(tx, id, settings, now);
        const keys = { test: await issueKeys(tx, tags, id, 'test', now), live: await issueKeys(tx, tags, id, 'live', now) };
        made = { project: toProject(row.rows[0]!), keys };
        return made;
      });
    // Its COMMIT's answer lost: the project's row (written in the same transaction as its keys) tells.
    const created = await outcomeOf(write, async () => ((await this.pool.query('SELECT 1 FROM projects WHERE id = $1', [id])).rowCount === 1 ? made : null));
    const secret = this.webhookSecretOf(created.project);
    for (const pair of Object.values(created.keys)) this.rememberIssued(pair, secret);
    return created;
  }

  async project(id: string): Promise<Project | null> {
    const r = await this.pool.query<ProjectRow>('SELECT * FROM projects WHERE id = $1', [id]);
    return r.rows[0] ? toProject(r.rows[0]) : null;
  }

  /**
   * For each (project, instant), in one statement: the project's webhook settings in force
   * then (its last change at or before it), `existed` true; for an instant before its first
   * settings (the project created after it, or a process's clock behind another's), its
   * first settings, `existed` false; null for a project with none recorded.
   */
  async webhookSettingsAt(asked: readonly { readonly projectId: string; readonly at: Date }[]): Promise<(WebhookSettingsAt | null)[]> {
    if (asked.length === 0) return [];
    const r = await this.pool.query<{ i: string; webhook_url: string | null; webhook_events: WebhookEventKind[]; existed: boolean }>(
      `SELECT q.i, s.webhook_url, s.webhook_events, s.valid_from <= q.at AS existed
       FROM unnest($1::uuid[], $2::timestamptz[]) WITH ORDINALITY AS q (project_id, at, i)
       CROSS JOIN LATERAL (
         SELECT webhook_url, webhook_events, valid_from FROM project_webhook_settings s WHERE s.project_id = q.project_id
         ORDER BY s.valid_from <= q.at DESC, CASE WHEN s.valid_from <= q.at THEN s.valid_from END DESC, s.valid_from
         LIMIT 1) s`,
      [asked.map((a) => a.projectId), asked.map((a) => a.at)],
    );
    const found: (WebhookSettingsAt | null)[] = asked.map(() => null);
    for (const row of r.rows) found[Number(row.i) - 1] = { webhookUrl: row.webhook_url, webhookEvents: row.webhook_events, existed: row.existed };
    return found;
  }

  /** Every project of the account, oldest first. */
  async projectsOfAccount(accountId: string): Promise<Project[]> {
    const r = await this.pool.query<ProjectRow>('SELECT * FROM projects WHERE account_id = $1 ORDER BY created_at, id', [accountId]);
    return r.rows.map((row) => toProject(row));
  }

  /** A new webhook secret, in clear and sealed for the project (webhook-secrets.ts). */
  newWebhookSecret(projectId: string): { readonly secret: string; readonly sealed: string } {
    const secret = `whsec_${token(24)}`;
    return { secret, sealed: this.secrets.seal(secret, webhookSecretOwner(projectId)) };
  }

  /** Keys issued by this process: live at once, with the project's webhook secret (its HMAC requests need no lookup of it). */
  rememberIssued(pair: KeyPair, webhookSecret: string): void {
    this.knownSecretKeys.markLive(hashSecretKey(pair.secretKey), true);
    this.knownPublicIds.markLive(pair.publicKey, webhookSecret);
  }

  /**
   * Loads what the database knows of every key into this process's memory (live
   * ones with their webhook secrets, revoked ones as dead), so that failing attempts
   * with existing keys cost no lookup from the first request. Answers the keys read
   * and the projects whose webhook secret does not open (their public ids are not remembered).
   */
  async warmUpCredentials(): Promise<{ readonly keys: number; readonly unopenable: readonly UnopenableWebhookSecretError[] }> {
    // The count of secret changes first: a change committed after it is noticed at the next look.
    await this.noticeWebhookSecretChanges();
    const r = await this.pool.query<{ secret_key_hash: string; public_key: string; revoked: boolean; project_id: string; webhook_secret: string }>(
      `SELECT k.secret_key_hash, k.public_key, k.revoked_at IS NOT NULL AS revoked, p.id AS project_id, p.webhook_secret
       FROM api_keys k JOIN projects p ON p.id = k.project_id`,
    );
    const unopenable = new Map<string, UnopenableWebhookSecretError>();
    for (const key of r.rows) {
      if (key.revoked) {
        this.knownSecretKeys.markDead(key.secret_key_hash);
        this.knownPublicIds.markDead(key.public_key);
        continue;
      }
      this.knownSecretKeys.markLive(key.secret_key_hash, true);
      try {
        this.knownPublicIds.markLive(key.public_key, this.webhookSecretOf({ id: key.project_id, sealedWebhookSecret: key.webhook_secret }));
      } catch (error) {
        // Not remembered: its requests are looked up, and refused naming the project.
        if (!(error instanceof UnopenableWebhookSecretError)) throw error;
        unopenable.set(key.project_id, error);
      }
    }
    return { keys: r.rowCount ?? 0, unopenable: [...unopenable.values()] };
  }

  /**
   * Looks every WEBHOOK_SECRET_CHANGES_POLL_MS whether a project's webhook secret
   * changed (webhook_secret_changes, counted by a trigger) and then forgets the
   * secrets remembered for public ids, so that a secret replaced by hand (the key-leak
   * runbook) holds in every API process within a poll. Answers the stop function.
   */
  followWebhookSecretChanges(): () => void {
    // A failed look (the database away) changes nothing: the next one compares again.
    const timer = setInterval(() => void this.noticeWebhookSecretChanges().catch(() => undefined), WEBHOOK_SECRET_CHANGES_POLL_MS);
    timer.unref();
    return () => clearInterval(timer);
  }

  async noticeWebhookSecretChanges(): Promise<void> {
    const r = await this.pool.query<{ generation: string }>('SELECT generation FROM webhook_secret_changes');
    const generation = r.rows[0]?.generation ?? null;
    if (generation !== this.webhookSecretGeneration && this.webhookSecretGeneration !== null) this.knownPublicIds.forgetLive();
    this.webhookSecretGeneration = generation;
  }

  /** Whether a secret key (by its hash) is live: issued for the mode and not revoked. Nothing is counted. */
  async secretKeyIsLive(secretKeyHash: string, mode: Mode): Promise<boolean> {
    const r = await this.pool.query(
      preparedStatement('SELECT 1 FROM api_keys WHERE secret_key_hash = $1 AND mode = $2 AND revoked_at IS NULL', [secretKeyHash, mode]),
    );
    return r.rowCount === 1;
  }

  /** The project and mode of a public key (HMAC mode) that is known and not revoked. */
  identifyByPublicKey(publicKey: string): Promise<MerchantIdentity | null> {
    const match = /^pk_(test|live)_[A-Za-z0-9_-]{16,64}$/.exec(publicKey);
    return match ? this.identifyByPublicId(publicKey, match[1] as Mode) : Promise.resolve(null);
  }

  /**
   * The project and mode of a secret key that is known and not revoked (looked up by
   * its hash, with the mode its prefix claims), and in the same round trip the request
   * counted in the key's rate window (`hits`, for AccessControl.admitCounted) and, for a
   * read of one invoice or payout, its poll mark taken when the request is within the
   * rate (`poll`, for AccessControl.pollVerdict). An unknown, revoked or wrong-mode key
   * counts and marks nothing.
   *
   * The lookups of one event-loop turn share one statement (secret-key-lookups.ts):
   * each is counted, judged and marked as if it had been looked up alone in arrival
   * order; a lookup alone in its turn is the single statement it always was.
   */
  identifyBySecretKeyCountingRequest(
    secretKey: string,
    now: Date,
    pollMark: PollMarkRequest | null = null,
    /** hashSecretKey(secretKey), when the caller has it already. */
    secretKeyHash?: string,
  ): Promise<CountedLookup | null> {
    const match = /^sk_(test|live)_[A-Za-z0-9_-]{16,64}$/.exec(secretKey);
    if (!match) return Promise.resolve(null);
    const hash = secretKeyHash ?? hashSecretKey(secretKey);
    return new Promise((resolve, reject) =>
      this.lookupsOfTheTurn.add({ secretKeyHash: hash, mode: match[1]!, windowSecond: rateWindowOf(now), pollMark, resolve, reject }),
    );
  }

  private readonly lookupsOfTheTurn = new OneTurnBatches<SecretKeyLookup<CountedLookup>>((lookups) => {
    for (const batch of batchesByPollInterval(lookups)) {
      void this.answerLookups(batch);
    }
  });

  /** Answers a batch's lookups from one statement (tried once more after a deadlock, which rolled it back whole). */
  private async answerLookups(batch: SecretKeyLookup<CountedLookup>[]): Promise<void> {
    try {
      let answers: (CountedLookup | null)[];
      try {
        answers = await this.lookUp(batch);
      } catch (error) {
        if ((error as { code?: string }).code !== '40P01') throw error;
        answers = await this.lookUp(batch);
      }
      batch.forEach((lookup, i) => lookup.resolve(answers[i]!));
    } catch (error) {
      for (const lookup of batch) lookup.reject(error);
    }
  }

  private async lookUp(batch: readonly SecretKeyLookup<CountedLookup>[]): Promise<(CountedLookup | null)[]> {
    type Row = ProjectRow & { key_id: string; key_mode: Mode; hits: number; poll_taken?: boolean; poll_last_at?: Date | null };
    const answer = (row: Row | undefined, pollMark: PollMarkRequest | null): CountedLookup | null =>
      row
        ? {
            identity: { project: toProject(row), mode: row.key_mode, keyId: row.key_id },
            hits: row.hits,
            poll: pollMark ? { taken: row.poll_taken === true, lastAt: row.poll_last_at ?? null } : null,
          }
        : null;
    if (batch.length === 1) {
      const lookup = batch[0]!;
      const r = await this.pool.query<Row>({ ...singleLookup(lookup), types: LOOKUP_TYPES });
      return [answer(r.rows[0], lookup.pollMark)];
    }
    const r = await this.pool.query<Row & { ord: number }>({ ...preparedStatement(BATCHED_LOOKUP, batchedLookupParameters(batch)), types: LOOKUP_TYPES });
    const byOrdinal = new Map(r.rows.map((row) => [row.ord, row]));
    return batch.map((lookup, i) => answer(byOrdinal.get(i + 1), lookup.pollMark));
  }

  /** A live key's project, when the key's stored mode is the one its prefix claims. */
  private async identifyByPublicId(publicKey: string, mode: Mode): Promise<MerchantIdentity | null> {
    const r = await this.pool.query<ProjectRow & { key_id: string; key_mode: Mode }>(
      preparedStatement(
        `SELECT ${projectColumnsOf('p')}, k.id AS key_id, k.mode AS key_mode FROM api_keys k JOIN projects p ON p.id = k.project_id
         WHERE k.public_key = $1 AND k.revoked_at IS NULL`,
        [publicKey],
      ),
    );
    const row = r.rows[0];
    if (!row || row.key_mode !== mode) return null;
    return { project: toProject(row), mode: row.key_mode, keyId: row.key_id };
  }
}
