/**
 * The rows of the merchant tables (accounts, projects, api_keys, project_webhook_settings)
 * and the statements that write them, shared by the Registry and the operator's use cases.
 * Imports only types from registry.ts, which imports this file's values at load.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import type { Mode, MethodOverrides } from '#domain';
import type { Account, KeyPair, Project, ProjectSettings, ProjectStatus, WebhookEventKind, WebhookSettings } from './registry';
import type { KeyTags } from './key-tags';

/** A secret key as api_keys stores it: its SHA-256, in hex. */
export const hashSecretKey = (secret: string): string => createHash('sha256').update(secret).digest('hex');

export interface AccountRow {
  id: string;
  name: string;
  email: string;
  created_at: Date;
}

/** An account's row: id, name, email, created_at. */
export const INSERT_ACCOUNT = 'INSERT INTO accounts (id, name, email, created_at) VALUES ($1, $2, $3, $4)';

export const toAccount = (row: AccountRow): Account => ({ id: row.id, name: row.name, email: row.email, createdAt: row.created_at });

export interface ProjectRow {
  id: string;
  account_id: string;
  name: string;
  status: ProjectStatus;
  webhook_url: string | null;
  webhook_events: WebhookEventKind[];
  usdt_enabled: boolean;
  hold_hours: number;
  methods: MethodOverrides;
  customer_fee_share: number;
  webhook_secret: string;
  id_namespace: string;
  created_at: Date;
  updated_at: Date;
  webhook_disabled_at: Date | null;
}

/**
 * The columns of ProjectRow, named: a prepared statement must not say `p.*`, whose
 * result type changes (and fails on every connection that prepared it) when a
 * migration adds a column while the process runs.
 */
export const PROJECT_COLUMNS = [
  'id',
  'account_id',
  'name',
  'status',
  'webhook_url',
  'webhook_events',
  'usdt_enabled',
  'hold_hours',
  'methods',
  'customer_fee_share',
  'webhook_secret',
  'id_namespace',
  'created_at',
  'updated_at',
  'webhook_disabled_at',
] as const satisfies readonly (keyof ProjectRow)[];
export const projectColumnsOf = (alias: string) => PROJECT_COLUMNS.map((c) => `${alias}.${c}`).join(', ');

/** A project from its row, its webhook secret as stored (sealed: webhook-secrets.ts). */
export const toProject = (r: ProjectRow): Project => ({
  id: r.id,
  accountId: r.account_id,
  name: r.name,
  status: r.status,
  webhookUrl: r.webhook_url,
  webhookEvents: r.webhook_events,
  usdtEnabled: r.usdt_enabled,
  holdHours: r.hold_hours,
  methodOverrides: r.methods,
  customerFeeShare: r.customer_fee_share,
  sealedWebhookSecret: r.webhook_secret,
  idNamespace: r.id_namespace,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  webhookDisabledAt: r.webhook_disabled_at,
});

/** The settings columns in table order: name, status, webhook_url, webhook_events, usdt_enabled, hold_hours, methods, customer_fee_share. */
export const settingsParams = (settings: ProjectSettings): unknown[] => [
  settings.name,
  settings.status,
  settings.webhookUrl,
  settings.webhookEvents,
  settings.usdtEnabled,
  settings.holdHours,
  JSON.stringify(settings.methodOverrides),
  settings.customerFeeShare,
];

/**
 * The project's webhook settings from `at` on, under the project's row lock: never dated
 * before its last change (two changes whose clocks were read in the other order, or
 * processes whose clocks differ), so the last row is always the project's settings; a
 * second change at the same instant replaces the first.
 */
export async function recordWebhookSettings(tx: Pick<PoolClient, 'query'>, projectId: string, settings: WebhookSettings, at: Date): Promise<void> {
  await tx.query(
    `INSERT INTO project_webhook_settings (project_id, valid_from, webhook_url, webhook_events)
     SELECT $1, greatest($2::timestamptz, max(valid_from)), $3, $4 FROM project_webhook_settings WHERE project_id = $1
     ON CONFLICT (project_id, valid_from) DO UPDATE SET webhook_url = EXCLUDED.webhook_url, webhook_events = EXCLUDED.webhook_events`,
    [projectId, at, settings.webhookUrl, settings.webhookEvents],
  );
}

/** A new key pair of the mode for the project, written in the caller's transaction. */
export async function issueKeys(tx: Pick<PoolClient, 'query'>, tags: KeyTags, projectId: string, mode: Mode, now: Date): Promise<KeyPair> {
  const pair: KeyPair = { secretKey: tags.newSecretKey(mode), publicKey: tags.newPublicId(mode) };
  await tx.query(`INSERT INTO api_keys (id, project_id, mode, secret_key_hash, public_key, created_at) VALUES ($1, $2, $3, $4, $5, $6)`, [
    randomUUID(),
    projectId,
    mode,
    hashSecretKey(pair.secretKey),
    pair.publicKey,
    now,
  ]);
  return pair;
}
