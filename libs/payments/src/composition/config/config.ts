/**
 * Gateway configuration, read once from the environment and validated at start.
 * A bad value stops the process with a message that names the variable and says
 * what is accepted, instead of failing later somewhere deep in a request.
 */
export type EventStoreKind = 'postgres' | 'eventstoredb';
export type ClockMode = 'system' | 'manual';

export interface GatewayConfig {
  /** HOST: the address the API listens on; 127.0.0.1 by default (this machine only), 0.0.0.0 in containers. */
  readonly host: string;
  readonly port: number;
  /** null: start an embedded PostgreSQL under dataDir. */
  readonly databaseUrl: string | null;
  readonly dataDir: string;
  readonly eventStore: EventStoreKind;
  readonly eventStoreConnectionString: string | null;
  /** At least 32 characters; null: generate a random token at start and print it (a given one is never printed). */
  readonly adminToken: string | null;
  readonly clock: ClockMode;
  /** LOG_LEVEL, a pino level; null: the entry point's own default (info for the servers, warn for the commands). */
  readonly logLevel: LogLevel | null;
  /** Where buyers reach the gateway (payment page links); null: http://127.0.0.1:<port>. */
  readonly publicUrl: string | null;
  /** Requests per second per key (spec: 60). */
  readonly rateLimitPerSecond: number;
  /** Shortest interval between two reads of one invoice or payout by one key (spec: 3 s). */
  readonly pollIntervalSeconds: number;
  /** How long a refund stays pending before the sandbox refund processor completes it (on the clock). */
  readonly refundProcessingSeconds: number;
  /** Rubles per 1 USDT, in kopecks: the rate source of USDT payouts. */
  readonly usdtRubRate: Kopecks;
  /** Payout fee and minimum per method: the defaults with PAYOUT_TERMS over them. */
  readonly payoutTerms: Readonly<Record<PayoutMethod, PayoutTerms>>;
  /**
   * WEBHOOK_ALLOW_PRIVATE_NETWORKS: webhooks of both modes may go to loopback, private
   * and reserved addresses (a sandbox on a laptop). Off: only globally routable unicast
   * addresses that are not the host's own, and such literals are refused when set.
   */
  readonly webhookAllowPrivateNetworks: boolean;
  /** METRICS_PORT: a separate unauthenticated listener for /metrics and /health (0 picks a free port); null: none. */
  readonly metricsPort: number | null;
  /**
   * SECRETS_KEY: the keys that encrypt secrets at rest (AES-256-GCM), 32 bytes each;
   * the first encrypts, every one decrypts (several during a rotation). null: the key
   * kept in DATA_DIR/secrets.key, generated on first start with mode 0600.
   */
  readonly secretsKeys: readonly Buffer[] | null;
  /**
   * AUDIT_SIGNING_KEY: the Ed25519 private key that signs the log's checkpoints and the
   * statements (PKCS#8 PEM, or its DER in base64). null: generated (AuditSigningKeys).
   */
  readonly auditSigningKey: KeyObject | null;
  /** Failed authentications per client address in a minute, per API process, before 429 (AUTH_FAILURE_LIMIT_PER_ADDRESS). */
  readonly authFailureLimitPerAddress: number;
  /** Failed authentications of all clients in a minute, per API process, past which every failing address gets 429 (AUTH_FAILURE_LIMIT_OVERALL). */
  readonly authFailureLimitOverall: number;
  /** TRUSTED_PROXIES: addresses or CIDR ranges of reverse proxies whose X-Forwarded-For names the client; empty: none. */
  readonly trustedProxies: readonly string[];
  /** Days a delivered or failed webhook delivery and its attempts are kept after its last attempt (WEBHOOK_RETENTION_DAYS). */
  readonly webhookRetentionDays: number;
}

import ipaddr from 'ipaddr.js';
import type { KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { parseSigningKey } from '../../audit/signing-keys';
import { MAX_WEBHOOK_RETENTION_DAYS } from '../../webhooks/webhook-retention';
import { Kopecks, parseMoney, parsePercent } from '#ledger';
import { DEFAULT_PAYOUT_TERMS, PAYOUT_METHODS, PayoutMethod, PayoutTerms } from '#domain';

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** pino's levels, as LOG_LEVEL may name them. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const blankToUndefined = (v: string | undefined): string | undefined => (v === undefined || v.trim() === '' ? undefined : v.trim());

export function loadConfig(env: Env = process.env): GatewayConfig {
  const problems: string[] = [];

  const portRaw = blankToUndefined(env.PORT) ?? '3000';
  const port = /^\d{1,5}$/.test(portRaw) ? Number(portRaw) : NaN;
  if (!(port >= 0 && port <= 65535)) {
    problems.push(`PORT must be an integer from 0 to 65535 (0 picks a free port), got "${portRaw}"`);
  }

  const host = blankToUndefined(env.HOST) ?? '127.0.0.1';
  // A name's last label is never all digits (RFC 3696): 999.1.1.1 or 10.0.0 is a mistyped address, not a name to resolve.
  const hostName = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(host) && !/(^|\.)\d+$/.test(host);
  if (isIP(host) === 0 && !hostName) {
    problems.push(`HOST must be an IP address or a host name to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface), got "${host}"`);
  }

  const databaseUrl = blankToUndefined(env.DATABASE_URL) ?? null;
  if (databaseUrl !== null && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push('DATABASE_URL must be a PostgreSQL connection URL (postgres://user:password@host:port/database)');
  } else if (databaseUrl !== null) {
    // What pg reads it with (pg-connection-string: new URL(), an empty host as in user:password@/db?host=/socket/dir
    // allowed), checked here: a mistyped port or bracket failed later with "Invalid URL", exit 1, after DATA_DIR was made.
    const problem = urlProblem(databaseUrl, databaseUrl.replace('@/', '@localhost/'));
    if (problem !== null) {
      // The text is not repeated: it holds a password.
      problems.push(
        `DATABASE_URL must be a PostgreSQL connection URL (postgres://user:password@host:port/database; a port from 1 to 65535, an IPv6 host in brackets, reserved characters of the user name and password percent-encoded): ${problem}`,
      );
    }
  }

  const dataDir = blankToUndefined(env.DATA_DIR) ?? './data';

  const eventStoreRaw = blankToUndefined(env.EVENT_STORE) ?? 'postgres';
  if (eventStoreRaw !== 'postgres' && eventStoreRaw !== 'eventstoredb') {
    problems.push(`EVENT_STORE must be "postgres" or "eventstoredb", got "${eventStoreRaw}"`);
  }
  const eventStore = eventStoreRaw as EventStoreKind;

  const eventStoreConnectionString = blankToUndefined(env.EVENTSTORE_CONNECTION_STRING) ?? null;
  if (eventStore === 'eventstoredb') {
    if (eventStoreConnectionString === null) {
      problems.push('EVENT_STORE=eventstoredb needs EVENTSTORE_CONNECTION_STRING (for example esdb://localhost:2113?tls=false)');
    } else {
      // The client's own check (@eventstore/db-client 6.x accepts esdb:// and esdb+discover:// only),
      // loaded here: the client and its gRPC stack cost every other process 0.1 s at start.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { connectionStringProblem } = require('#event-store/eventstoredb') as typeof import('#event-store/eventstoredb');
      const problem = connectionStringProblem(eventStoreConnectionString);
      if (problem !== null) {
        problems.push(
          `EVENTSTORE_CONNECTION_STRING must be a connection string the EventStoreDB client accepts (esdb://host:2113?tls=false, esdb://user:password@host:2113, esdb+discover://cluster.example.com:2113): ${problem}`,
        );
      }
    }
  }

  const adminToken = blankToUndefined(env.ADMIN_TOKEN) ?? null;
  if (adminToken !== null && adminToken.length < ADMIN_TOKEN_MIN_LENGTH) {
    problems.push(
      `ADMIN_TOKEN must be at least ${ADMIN_TOKEN_MIN_LENGTH} characters long, for example openssl rand -base64 24 (leave it unset to get a random one)`,
    );
  }
  // What `Authorization: Bearer <token>` can carry (operator-token.ts reads \S+ from a header of bytes, not UTF-8):
  // a space, a tab or a non-ASCII character inside would make a token that no request can present.
  if (adminToken !== null && !ADMIN_TOKEN_CHARACTERS.test(adminToken)) {
    problems.push(
      'ADMIN_TOKEN must be printable ASCII without spaces (letters, digits and punctuation, for example openssl rand -base64 24): an Authorization header carries no other characters, so no request could use it',
    );
  }

  const logLevelRaw = blankToUndefined(env.LOG_LEVEL);
  const logLevel = logLevelRaw === undefined ? null : LOG_LEVELS.find((l) => l === logLevelRaw);
  if (logLevel === undefined) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevelRaw}"`);

  const clockRaw = blankToUndefined(env.CLOCK) ?? 'system';
  if (clockRaw !== 'system' && clockRaw !== 'manual') {
    problems.push(`CLOCK must be "system" or "manual", got "${clockRaw}"`);
  }

  const publicUrlRaw = blankToUndefined(env.PUBLIC_URL);
  let publicUrl: string | null = null;
  if (publicUrlRaw !== undefined) {
    const problem = urlProblem(publicUrlRaw);
    if (!/^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/.test(publicUrlRaw)) {
      problems.push(`PUBLIC_URL must be an http(s) URL such as https://pay.example.com, got "${publicUrlRaw}"`);
    } else if (problem !== null) {
      // A port past 65535 or an unclosed bracket passed the pattern, and every invoice carried a url no browser opens.
      problems.push(
        `PUBLIC_URL must be an http(s) URL such as https://pay.example.com (a port from 1 to 65535, an IPv6 host in brackets), got "${publicUrlRaw}": ${problem}`,
      );
    } else publicUrl = publicUrlRaw.replace(/(?<!\/)\/+$/, '');
  }

  const rateRaw = blankToUndefined(env.RATE_LIMIT_PER_SECOND) ?? '60';
  const rateLimitPerSecond = /^\d{1,9}$/.test(rateRaw) && Number(rateRaw) >= 1 ? Number(rateRaw) : NaN;
  if (Number.isNaN(rateLimitPerSecond)) problems.push(`RATE_LIMIT_PER_SECOND must be a positive integer, got "${rateRaw}"`);
  const pollRaw = blankToUndefined(env.POLL_INTERVAL_SECONDS) ?? '3';
  const pollIntervalSeconds = /^\d{1,6}$/.test(pollRaw) ? Number(pollRaw) : NaN;
  if (Number.isNaN(pollIntervalSeconds)) problems.push(`POLL_INTERVAL_SECONDS must be a whole number of seconds, got "${pollRaw}"`);

  const refundRaw = blankToUndefined(env.REFUND_PROCESSING_SECONDS) ?? '10';
  const refundProcessingSeconds = /^\d{1,7}$/.test(refundRaw) ? Number(refundRaw) : NaN;
  if (Number.isNaN(refundProcessingSeconds)) problems.push(`REFUND_PROCESSING_SECONDS must be a whole number of seconds, got "${refundRaw}"`);

  const rateRaw2 = blankToUndefined(env.USDT_RUB_RATE) ?? '95.00';
  let usdtRubRate: Kopecks = NaN;
  try {
    usdtRubRate = parseMoney(rateRaw2);
  } catch {
    /* reported below */
  }
  if (!(usdtRubRate > 0)) problems.push(`USDT_RUB_RATE must be rubles per 1 USDT with at most two decimals, such as 95.40, got "${rateRaw2}"`);

  const privateRaw = (blankToUndefined(env.WEBHOOK_ALLOW_PRIVATE_NETWORKS) ?? 'false').toLowerCase();
  if (privateRaw !== 'true' && privateRaw !== 'false') problems.push(`WEBHOOK_ALLOW_PRIVATE_NETWORKS must be "true" or "false", got "${privateRaw}"`);
  const webhookAllowPrivateNetworks = privateRaw === 'true';

  const metricsPortRaw = blankToUndefined(env.METRICS_PORT);
  let metricsPort: number | null = null;
  if (metricsPortRaw !== undefined) {
    metricsPort = /^\d{1,5}$/.test(metricsPortRaw) ? Number(metricsPortRaw) : NaN;
    if (!(metricsPort >= 0 && metricsPort <= 65535)) {
      problems.push(`METRICS_PORT must be an integer from 0 to 65535 (0 picks a free port), or unset for no metrics listener, got "${metricsPortRaw}"`);
    } else if (metricsPort !== 0 && metricsPort === port) {
      problems.push(`METRICS_PORT must differ from PORT (${port}): /metrics on the API port is GET /metrics with the operator token`);
    }
  }

  const payoutTerms = readPayoutTerms(blankToUndefined(env.PAYOUT_TERMS), problems);

  const secretsKeys = readSecretsKeys(blankToUndefined(env.SECRETS_KEY), problems);

  const signingKeyRaw = blankToUndefined(env.AUDIT_SIGNING_KEY);
  const auditSigningKey = signingKeyRaw === undefined ? null : parseSigningKey(signingKeyRaw);
  if (signingKeyRaw !== undefined && auditSigningKey === null) {
    problems.push('AUDIT_SIGNING_KEY must be an Ed25519 private key, PKCS#8 PEM or its DER in base64 (openssl genpkey -algorithm ed25519)');
  }
  if (blankToUndefined(env.AUDIT_CHECKPOINT_KEY) !== undefined) {
    problems.push('AUDIT_CHECKPOINT_KEY is no longer read: checkpoints are signed with Ed25519 (AUDIT_SIGNING_KEY, docs/audit-log.md); remove it');
  }

  const positive = (name: string, fallback: string, what: string, max?: number): number => {
    const raw = blankToUndefined(env[name]) ?? fallback;
    if (/^\d{1,9}$/.test(raw) && Number(raw) >= 1 && (max === undefined || Number(raw) <= max)) return Number(raw);
    problems.push(`${name} must be a positive integer${max === undefined ? '' : ` of at most ${max}`} (${what}), got "${raw}"`);
    return NaN;
  };
  const authFailureLimitPerAddress = positive('AUTH_FAILURE_LIMIT_PER_ADDRESS', '20', 'failed authentications per client address in a minute');
  const authFailureLimitOverall = positive('AUTH_FAILURE_LIMIT_OVERALL', '300', 'failed authentications of all clients in a minute');
  const webhookRetentionDays = positive(
    'WEBHOOK_RETENTION_DAYS',
    '30',
    `days a finished webhook delivery is kept; ${MAX_WEBHOOK_RETENTION_DAYS} is 100 years`,
    MAX_WEBHOOK_RETENTION_DAYS,
  );

  const trustedProxies = (blankToUndefined(env.TRUSTED_PROXIES) ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  for (const proxy of trustedProxies) {
    if (!isAddressOrRange(proxy)) problems.push(`TRUSTED_PROXIES must be IP addresses or CIDR ranges separated by commas, such as 10.0.0.0/8, got "${proxy}"`);
    // Refused by Fastify's proxy-addr only once the database was up (exit 1, unnamed).
    else if (Number(proxy.split('/')[1]) === 0) {
      problems.push(
        `TRUSTED_PROXIES must list the proxies' addresses or ranges, not a /0 range ("${proxy}"): it would believe the X-Forwarded-For of every peer, so any client could name its own address`,
      );
    } else if (holdsEveryIpv4Peer(proxy)) {
      problems.push(
        `TRUSTED_PROXIES must list the proxies' addresses or ranges, not one that holds every IPv4 address ("${proxy}"): an IPv4 peer is compared as ::ffff:a.b.c.d, so it would believe the X-Forwarded-For of every IPv4 peer and any client could name its own address`,
      );
    }
  }

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    logLevel: logLevel ?? null,
    host,
    port,
    databaseUrl,
    dataDir,
    eventStore,
    eventStoreConnectionString,
    adminToken,
    clock: clockRaw as ClockMode,
    publicUrl,
    rateLimitPerSecond,
    pollIntervalSeconds,
    refundProcessingSeconds,
    usdtRubRate,
    payoutTerms,
    webhookAllowPrivateNetworks,
    metricsPort,
    secretsKeys,
    auditSigningKey,
    authFailureLimitPerAddress,
    authFailureLimitOverall,
    trustedProxies,
    webhookRetentionDays,
  };
}

/** Where a local client reaches a listener on `host`: the host itself, or loopback for a wildcard address. */
export function urlHostOf(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return isIP(host) === 6 ? `[${host}]` : host;
}

/** The shortest operator token accepted (a generated one is 32 base64url characters: 192 bits). */
export const ADMIN_TOKEN_MIN_LENGTH = 32;

/** The characters of an operator token: visible ASCII, no whitespace (what a Bearer header can carry). */
const ADMIN_TOKEN_CHARACTERS = /^[\x21-\x7E]+$/;

/**
 * Why `text` is no URL a client can use (new URL() refuses it, or its port is 0),
 * trying `fallback` too when given; null when it is one.
 */
function urlProblem(text: string, fallback = text): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    try {
      url = new URL(fallback);
    } catch {
      return 'it does not parse as a URL';
    }
  }
  return url.port === '' || Number(url.port) >= 1 ? null : `its port must be from 1 to 65535, got ${url.port}`;
}

/**
 * ::ffff:0.0.0.0/96 (::ffff:0:0/96): proxy-addr compares an IPv4 peer with an IPv4-mapped range of a prefix of 96 or
 * more as ::ffff:a.b.c.d, so this one, an IPv4 /0 in IPv6 form, trusts every IPv4 peer.
 */
function holdsEveryIpv4Peer(range: string): boolean {
  if (!range.includes('/')) return false;
  const [address, bits] = ipaddr.parseCIDR(range);
  return address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits === 96;
}

function isAddressOrRange(text: string): boolean {
  const [address, prefix, ...rest] = text.split('/');
  const family = isIP(address ?? '');
  if (family === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

/**
 * SECRETS_KEY: one key, or several separated by commas during a rotation (the first
 * encrypts, all decrypt). Each is 32 random bytes as 64 hex digits or as base64
 * (openssl rand -base64 32).
 */
function readSecretsKeys(raw: string | undefined, problems: string[]): Buffer[] | null {
  if (raw === undefined) return null;
  const keys: Buffer[] = [];
  for (const text of raw.split(',').map((k) => k.trim())) {
    const key = parseSecretsKey(text);
    if (key) keys.push(key);
    else {
      problems.push('SECRETS_KEY must be 32 random bytes as 64 hex digits or base64 (openssl rand -base64 32), several separated by commas during a rotation');
      return null;
    }
  }
  return keys;
}

/** 32 bytes from 64 hex digits or base64/base64url; null for anything else. */
export function parseSecretsKey(text: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const key = Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    return key.length === 32 ? key : null;
  }
  return null;
}

/** PAYOUT_TERMS: JSON such as {"sbp": {"feePct": "0.50", "min": "500.00"}}; fields left out keep their defaults. */
function readPayoutTerms(raw: string | undefined, problems: string[]): Record<PayoutMethod, PayoutTerms> {
  const terms = { ...DEFAULT_PAYOUT_TERMS } as Record<PayoutMethod, PayoutTerms>;
  if (raw === undefined) return terms;
  // Each problem names what is wrong where: a message about the whole value would leave the operator guessing.
  const bad = (what: string) => problems.push(`PAYOUT_TERMS must be JSON like {"sbp": {"feePct": "1.00", "min": "100.00"}}: ${what}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    bad('it is not JSON');
    return terms;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    bad('it is not an object');
    return terms;
  }
  for (const [method, value] of Object.entries(parsed)) {
    if (!(PAYOUT_METHODS as readonly string[]).includes(method)) {
      bad(`unknown method ${JSON.stringify(method)} (methods: ${PAYOUT_METHODS.join(', ')})`);
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      bad(`${method} is not an object`);
      continue;
    }
    // Only feePct and min: a misspelt field (fee_pct) would leave the default in force unseen.
    const unknown = Object.keys(value).filter((k) => k !== 'feePct' && k !== 'min');
    if (unknown.length > 0) {
      bad(`${method} has ${unknown.map((k) => JSON.stringify(k)).join(', ')}; its fields are feePct and min`);
      continue;
    }
    const v = value as { feePct?: unknown; min?: unknown };
    const field = <T>(name: string, given: unknown, parse: (x: unknown) => T, fits: (x: T) => boolean, rule: string): T | null => {
      try {
        const parsedValue = parse(given);
        if (fits(parsedValue)) return parsedValue;
      } catch {
        // Refused below, with the rule.
      }
      bad(`${method}.${name} must be ${rule}, got ${JSON.stringify(given)}`);
      return null;
    };
    const feePct =
      v.feePct === undefined
        ? terms[method as PayoutMethod].feePct
        : field('feePct', v.feePct, parsePercent, (x) => x < 100 * 10_000, 'a percentage below 100 such as "1.00"');
    const min =
      v.min === undefined ? terms[method as PayoutMethod].min : field('min', v.min, parseMoney, (x) => x > 0, 'an amount above zero such as "100.00"');
    if (feePct !== null && min !== null) terms[method as PayoutMethod] = { feePct, min };
  }
  return terms;
}

/**
 * The configuration of a command-line entry point: on a bad value, the problems go to
 * stderr under the command's name and the process exits with code 2.
 */
export function loadConfigOrExit(command: string, env: Env = process.env): GatewayConfig {
  const tellMisspelt = () => {
    for (const [given, meant] of misspelledVariables(env)) process.stderr.write(`${command}: ${given} is not read (did you mean ${meant}?)\n`);
  };
  try {
    const config = loadConfig(env);
    tellMisspelt();
    return config;
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${command}: ${error.message}\n`);
    // The misspelling may be why (EVENTSTORE_CONNECTION_STRNG: "… is required").
    tellMisspelt();
    process.exit(2);
  }
}

/** `--help` (or `-h`) as a command's first argument: its usage on stdout and exit 0, before it reads or writes anything. */
export function usageOnHelp(usage: string, args: readonly string[] = process.argv.slice(2)): void {
  // The first argument only: elsewhere it may be an option's value (`--checkpoint -h`, a file), which must not read as help.
  if (args[0] !== '--help' && args[0] !== '-h') return;
  process.stdout.write(`${usage}\n`);
  process.exit(0);
}

/**
 * For a command that takes no arguments (its settings are environment variables): any
 * argument goes to stderr under the command's name and the process exits with code 2
 * before it reads or writes anything, so that an option the operator believed in
 * (`-- --dry-run`) is never silently ignored by a command that writes.
 */
export function refuseArgumentsOrExit(command: string, args: readonly string[] = process.argv.slice(2)): void {
  if (args.length === 0) return;
  usageOnHelp(`usage: ${command} takes no arguments; its settings are environment variables (docs/configuration.md)`, args);
  process.stderr.write(`${command}: takes no arguments, got ${args.join(' ')} (its settings are environment variables: docs/configuration.md)\n`);
  process.exit(2);
}

/** The variables the gateway reads (docs/configuration.md's table). */
export const GATEWAY_VARIABLES = [
  'HOST',
  'PORT',
  'DATABASE_URL',
  'DATA_DIR',
  'EVENT_STORE',
  'EVENTSTORE_CONNECTION_STRING',
  'ADMIN_TOKEN',
  'CLOCK',
  'LOG_LEVEL',
  'PUBLIC_URL',
  'RATE_LIMIT_PER_SECOND',
  'POLL_INTERVAL_SECONDS',
  'REFUND_PROCESSING_SECONDS',
  'USDT_RUB_RATE',
  'PAYOUT_TERMS',
  'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
  'WEBHOOK_RETENTION_DAYS',
  'SECRETS_KEY',
  'AUDIT_SIGNING_KEY',
  'AUTH_FAILURE_LIMIT_PER_ADDRESS',
  'AUTH_FAILURE_LIMIT_OVERALL',
  'TRUSTED_PROXIES',
  'METRICS_PORT',
] as const;

/** PORT0, PORT1, PORTS, HOST0: what Marathon and Mesos set for every task, not a misspelt PORT or HOST. */
const PLATFORM_PORTS_AND_HOSTS = /^(PORT|HOST)(\d+|S)$/;

/**
 * Set variables that look like a misspelt one the gateway reads (`CLOK`, `PROT`,
 * `DATA_DIRR`, `port`: one letter added, dropped, changed or swapped, or another case),
 * each with the one meant: the gateway would otherwise run on its default unawares.
 */
export function misspelledVariables(env: Env): [given: string, meant: string][] {
  const known = new Set<string>(GATEWAY_VARIABLES);
  const found: [string, string][] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || known.has(name) || name.length < 4 || PLATFORM_PORTS_AND_HOSTS.test(name)) continue;
    const meant = GATEWAY_VARIABLES.find((v) => v === name.toUpperCase() || oneEditApart(v, name));
    if (meant !== undefined) found.push([name, meant]);
  }
  return found;
}

/** Whether two names differ by one letter added, dropped or changed, or two neighbours swapped. */
function oneEditApart(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 1) return false;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const rest = (x: string, y: string) => x === y;
  return (
    rest(a.slice(i + 1), b.slice(i + 1)) || // changed
    rest(a.slice(i + 1), b.slice(i)) || // dropped from b
    rest(a.slice(i), b.slice(i + 1)) || // added in b
    (a[i] === b[i + 1] && a[i + 1] === b[i] && rest(a.slice(i + 2), b.slice(i + 2))) // swapped
  );
}
