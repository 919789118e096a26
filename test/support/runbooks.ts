/**
 * What the runbook tests (test/operations/runbooks) share: the runbooks' text read
 * from docs/operations.md (so the SQL, scripts and calls a test runs are the ones
 * printed there, and doc and test cannot drift), the deployment they speak of (an
 * API process and a projector process apart), the npm commands as processes, and
 * the Prometheus text of /metrics.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { STARTED_PROCESSES } from './started-processes';
import { Entry, fileDataDir, ROOT, RunningGateway, RunningProcess, startGateway, startProcess, PROJECTOR_PUBLIC_URL } from './gateway-process';
import { api, Client, Json, Operator, poll, Reply } from './merchant-fixtures';

export const OPERATIONS_MD = path.join(ROOT, 'docs', 'operations.md');

/** The text of one heading's section of docs/operations.md (up to the next heading of its level or above). */
export function docSection(heading: string): string {
  const text = readFileSync(OPERATIONS_MD, 'utf8');
  const lines = text.split('\n');
  const start = lines.findIndex((l) => /^#{2,4} /.test(l) && l.replace(/^#+ /, '') === heading);
  if (start < 0) throw new Error(`docs/operations.md has no section "${heading}"`);
  const level = lines[start]!.indexOf(' ');
  const end = lines.findIndex((l, i) => i > start && /^#+ /.test(l) && l.indexOf(' ') <= level);
  return lines.slice(start, end < 0 ? undefined : end).join('\n');
}

/** The text of `section` from the first line containing `marker` on. */
export function after(section: string, marker: string): string {
  const at = section.indexOf(marker);
  if (at < 0) throw new Error(`the runbook text has no "${marker}"`);
  return section.slice(at);
}

/** The first fenced block of `lang` (```sql, ```sh) in `text`, without its fences and its list indentation. */
export function fencedBlock(text: string, lang: string): string {
  const match = new RegExp('^( *)```' + lang + '\\n([\\s\\S]*?)^ *```', 'm').exec(text);
  if (!match) throw new Error(`no \`\`\`${lang} block in:\n${text.slice(0, 400)}`);
  const indent = match[1]!.length;
  return match[2]!
    .split('\n')
    .map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length)))
    .join('\n')
    .trimEnd();
}

/** The first inline `code` in `text` that starts with `prefix`, its line breaks read as spaces (as Markdown renders them). */
export function inlineCode(text: string, prefix: string): string {
  const prose = text.replace(/^ *```[\s\S]*?^ *```/gm, '');
  for (const match of prose.matchAll(/`([^`]+)`/g)) {
    const code = match[1]!.replace(/\s*\n\s*/g, ' ');
    if (code.startsWith(prefix)) return code;
  }
  throw new Error(`no inline code starting with "${prefix}"`);
}

/** The doc's placeholders (`<pid>`, `'<project id>'`, `{id}`) replaced; every placeholder must be given. */
export function fill(text: string, values: Record<string, string | number>): string {
  let filled = text;
  for (const [placeholder, value] of Object.entries(values)) {
    if (!filled.includes(placeholder)) throw new Error(`the runbook text has no ${placeholder}: ${text}`);
    filled = filled.split(placeholder).join(String(value));
  }
  const left = /<[a-z][a-z ]*>|\{[a-zA-Z]+\}/.exec(filled);
  if (left) throw new Error(`placeholder ${left[0]} not filled in: ${filled}`);
  return filled;
}

/** Who runs a block of the auditor's role set-up: the gateway's role (the owner of the database and its tables), or a role that may create roles. */
export type AuditorRoleRunner = 'owner' | 'createrole';

/** The ```sql blocks of the auditor's role set-up (operations.md, "Read-only commands"), each with the role the text before it names to run it. */
export function auditorRoleSetUp(): { runner: AuditorRoleRunner; sql: string }[] {
  const text = after(docSection('Read-only commands'), 'A role for them');
  const blocks = [...text.matchAll(/([\s\S]*?)^```sql\n([\s\S]*?)^```/gm)].map(([, prose, sql]) => {
    if (/superuser|CREATEROLE/.test(prose!)) return { runner: 'createrole' as const, sql: sql! };
    if (/gateway's (database )?role/.test(prose!)) return { runner: 'owner' as const, sql: sql! };
    throw new Error(`the text before this SQL names no role to run it:\n${prose}`);
  });
  if (blocks.length === 0) throw new Error(`no \`\`\`sql block in:\n${text}`);
  return blocks;
}

/**
 * Makes the auditor's role with the SQL of operations.md ("Read-only commands"), its
 * name, password and database filled in (nothing else: the rest runs as printed), each block
 * run as printed as the role its text names, connected with `urls`; the role's URL.
 */
export async function makeAuditorRole(urls: Record<AuditorRoleRunner, string>, role: string, password: string): Promise<string> {
  const ownerUrl = new URL(urls.owner);
  const values: Record<string, string> = {
    '<role>': role,
    "PASSWORD '…'": `PASSWORD '${password}'`,
    'ON DATABASE gateway': `ON DATABASE ${ownerUrl.pathname.slice(1)}`,
  };
  for (const block of auditorRoleSetUp()) {
    const sql = block.sql.replace(/\bauditor\b/g, '<role>');
    const client = new PgClient({ connectionString: urls[block.runner] });
    await client.connect();
    try {
      // Each block holds some of the placeholders; `fill` refuses one left unfilled.
      await client.query(fill(sql, Object.fromEntries(Object.entries(values).filter(([placeholder]) => sql.includes(placeholder)))));
    } catch (error) {
      throw new Error(`the doc's SQL failed as the ${block.runner} role: ${(error as Error).message}\n${block.sql}`, { cause: error });
    } finally {
      await client.end();
    }
  }
  ownerUrl.username = role;
  ownerUrl.password = password;
  return ownerUrl.toString();
}

/** One sample of a Prometheus text exposition: the value of `name` with these labels (all given labels must match), or undefined. */
export function metric(exposition: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of exposition.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found: Record<string, string> = {};
    for (const l of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) found[l[1]!] = l[2]!;
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[3]);
  }
  return undefined;
}

/** The deployment the runbooks speak of: an API process and a projector process apart, on one database. */
export interface Deployment {
  readonly api: RunningGateway;
  readonly projector: RunningProcess;
  /** The operator API of the API process. */
  readonly operator: Operator;
  /** The projector's METRICS_PORT listener: /metrics and the detail of /health/ready, no token (its only HTTP). */
  readonly projectorHttp: Client;
  /** The API's /metrics and /health/ready with the operator token. */
  readonly apiHttp: Client;
  stop(): Promise<void>;
}

/**
 * Starts `npm run start:api` and `npm run start:projector` with `env` (plus, on the
 * projector, METRICS_PORT=0: a projector-only process serves its metrics and the
 * detail of its readiness only there). Both find each other through the database.
 */
export async function startDeployment(env: Record<string, string>, projectorEnv: Record<string, string> = {}): Promise<Deployment> {
  const api = await startGateway('api', env);
  const projector = startProcess('projector', { ...env, METRICS_PORT: '0', PUBLIC_URL: PROJECTOR_PUBLIC_URL, ...projectorEnv });
  try {
    const [, metricsUrl] = await projector.waitForOutput(/metrics and health \(METRICS_PORT, no token\): (http:\/\/127\.0\.0\.1:\d+)\/metrics/);
    return deploymentOf(api, projector, metricsUrl!);
  } catch (error) {
    await Promise.all([api.kill(), projector.kill()]);
    throw error;
  }
}

function deploymentOf(apiProcess: RunningGateway, projector: RunningProcess, metricsUrl: string): Deployment {
  return {
    api: apiProcess,
    projector,
    operator: new Operator(apiProcess.baseUrl, apiProcess.adminToken),
    projectorHttp: api(metricsUrl),
    apiHttp: api(apiProcess.baseUrl, apiProcess.adminToken),
    // The projector first: its last batches still reach the database the API may have started.
    stop: async () => {
      await projector.kill();
      await apiProcess.kill();
    },
  };
}

export interface ProjectionState {
  readonly projection: string;
  readonly state: string;
  readonly checkpoint: string | null;
  readonly lastError: string | null;
  readonly lag: number | null;
}

/** The projector's readiness detail. */
export async function readiness(deployment: Deployment): Promise<Json> {
  const r = await deployment.projectorHttp.get('/health/ready');
  if (r.status !== 200) throw new Error(`/health/ready of the projector: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export async function projectionState(deployment: Deployment, projection: string): Promise<ProjectionState> {
  const found = ((await readiness(deployment)).projections as ProjectionState[]).find((p) => p.projection === projection);
  if (!found) throw new Error(`the projector does not report ${projection}`);
  return found;
}

/** Waits until every projection of the projector is live with lag 0. */
export function everyProjectionLive(deployment: Deployment, timeoutMs = 30_000): Promise<ProjectionState[]> {
  return poll(
    async () => (await readiness(deployment)).projections as ProjectionState[],
    (all) => all.length > 0 && all.every((p) => p.state === 'live' && p.lag === 0),
    'every projection live with lag 0',
    timeoutMs,
  );
}

/** The projector's /metrics text. */
export async function projectorMetrics(deployment: Deployment): Promise<string> {
  const r = await deployment.projectorHttp.get('/metrics');
  if (r.status !== 200) throw new Error(`/metrics of the projector: ${r.status}`);
  return r.body as string;
}

export interface CommandRun {
  readonly code: number | string;
  readonly output: string;
}

/** An npm command (`npm run <command>`, i.e. its compiled entry point) run to its end. */
export async function runCommand(entry: Entry, env: Record<string, string>, args: string[] = []): Promise<CommandRun> {
  const proc = startProcess(entry, env, args);
  const code = await proc.exited;
  return { code, output: proc.output() };
}

/** The command exited 0 (else its output is the failure's message); its output. */
export async function runCommandOk(entry: Entry, env: Record<string, string>, args: string[] = []): Promise<string> {
  const run = await runCommand(entry, env, args);
  if (run.code !== 0) throw new Error(`${entry} ${args.join(' ')} exited ${run.code}:\n${run.output}`);
  return run.output;
}

/**
 * A command line as the runbook prints it (`npm run projections:rebuild ledger`), run by
 * sh in the checkout as an operator runs it: npm, the script's build check, the command.
 * The environment is PATH and `env` only, as for startProcess. After `timeoutMs` its process
 * group is sent SIGTERM, as Ctrl-C would stop it (a command then stops what it started, such
 * as its own embedded server, in a group of its own), and SIGKILL 10 s later; the code is then
 * 'timeout'. The group is killed too when the test file ends.
 */
export function runPrinted(commandLine: string, env: Record<string, string>, timeoutMs = 240_000): Promise<CommandRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', commandLine], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', DATA_DIR: env.DATA_DIR ?? fileDataDir(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    (globalThis as Record<string, unknown> & { [STARTED_PROCESSES]?: Set<ChildProcess> })[STARTED_PROCESSES]?.add(child);
    let timedOut = false;
    const signal = (name: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, name);
      } catch {
        // The group has ended.
      }
    };
    let killer: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      signal('SIGTERM');
      killer = setTimeout(() => signal('SIGKILL'), 10_000);
    }, timeoutMs);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('close', (code, ended) => {
      clearTimeout(timer);
      clearTimeout(killer);
      resolve({ code: timedOut ? 'timeout' : (code ?? String(ended)), output });
    });
  });
}

/** runPrinted, and its output when it exited 0 (else the failure's message). */
export async function runPrintedOk(commandLine: string, env: Record<string, string>): Promise<string> {
  const run = await runPrinted(commandLine, env);
  if (run.code !== 0) throw new Error(`${commandLine} exited ${run.code}:\n${run.output}`);
  return run.output;
}

/** Seconds on a wall clock, for the test's own time report. */
export const secondsSince = (startedAt: number): string => ((Date.now() - startedAt) / 1000).toFixed(1);

/** An operator call as the runbook prints it (`POST /admin/v1/…`), its placeholders filled, sent with the operator token. */
export async function operatorCall(deployment: Deployment, printed: string, values: Record<string, string>, body?: unknown): Promise<Reply> {
  const [method, path, ...rest] = fill(printed, values).split(' ');
  if (rest.length > 0 || !path!.startsWith('/admin/v1/')) throw new Error(`not an operator call: ${printed}`);
  switch (method) {
    case 'GET':
      return deployment.operator.http.get(path!);
    case 'POST':
      return deployment.operator.http.post(path!, body);
    case 'PATCH':
      return deployment.operator.http.patch(path!, body);
    default:
      throw new Error(`not an operator call: ${printed}`);
  }
}

/**
 * The URL of the embedded server running under `dataDir`, found as the runbooks tell an
 * operator to find it: user postgres, database gateway, the port in line 4 of
 * DATA_DIR/postgres/postmaster.pid, the password in DATA_DIR/postgres-password.
 */
export function embeddedDatabaseUrl(dataDir: string): string {
  const port = readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8')
    .split('\n')[3]!
    .trim();
  const password = readFileSync(path.join(dataDir, 'postgres-password'), 'utf8').trim();
  return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/gateway?sslmode=disable`;
}

/** The checksum lines of read-models:checksum (table, rows, md5), without its notes on stderr. */
export const checksumLines = (output: string): string[] => output.split('\n').filter((l) => /^\S+\s+\d+\s+[0-9a-f]{32}$/.test(l));
