import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stopWithTheCheck } from './processes';

/** What the check changes in deploy/nginx.conf to run it here: addresses only. */
export interface NginxSubstitutions {
  /** `listen 8080;` becomes `listen <listen>;`. */
  readonly listen: string;
  /** `server api:3000 <params>;` becomes one `server <address> <params>;` per address. */
  readonly upstreams: readonly string[];
}

/**
 * deploy/nginx.conf as written for the compose network, with only the addresses
 * substituted: the port it listens on and the API replicas of its upstream. Every
 * other line is kept as it is; a file whose `listen 8080;` or `server api:3000`
 * is not found exactly once is refused, so the check never runs a file other than
 * the documented one.
 */
export function renderNginxConf(source: string, substitutions: NginxSubstitutions): string {
  const listen = /^(\s*)listen 8080;$/gm;
  const upstream = /^(\s*)server api:3000(\s[^;]*)?;$/gm;
  const count = (re: RegExp) => source.match(re)?.length ?? 0;
  if (count(listen) !== 1) throw new Error('deploy/nginx.conf: expected exactly one "listen 8080;" line');
  if (count(upstream) !== 1) throw new Error('deploy/nginx.conf: expected exactly one "server api:3000 ...;" line in its upstream');
  return source
    .replace(listen, (_, indent: string) => `${indent}listen ${substitutions.listen};`)
    .replace(upstream, (_, indent: string, params: string | undefined) =>
      substitutions.upstreams.map((address) => `${indent}server ${address}${params ?? ''};`).join('\n'),
    );
}

/**
 * The main configuration around it, as the nginx image's own nginx.conf includes
 * conf.d/default.conf inside `http {}`: here the pid file, the logs and the temporary
 * folders live in `dir`, so nginx runs from a temporary folder without root.
 */
export function mainNginxConf(dir: string, included: string): string {
  return `# Written by npm run deploy:check: the nginx image's main configuration, run from ${dir}.
worker_processes 1;
daemon off;
pid ${path.join(dir, 'nginx.pid')};
error_log ${path.join(dir, 'error.log')} warn;
events {
  worker_connections 1024;
}
http {
  default_type application/octet-stream;
  log_format upstreams '$time_iso8601 $status "$request" upstream=$upstream_addr upstream_status=$upstream_status $request_time s';
  access_log ${path.join(dir, 'access.log')} upstreams;
  keepalive_timeout 65;
  client_body_temp_path ${path.join(dir, 'client_body')};
  proxy_temp_path ${path.join(dir, 'proxy')};
  fastcgi_temp_path ${path.join(dir, 'fastcgi')};
  uwsgi_temp_path ${path.join(dir, 'uwsgi')};
  scgi_temp_path ${path.join(dir, 'scgi')};
  include ${included};
}
`;
}

/** Debian's nginx (or NGINX_BIN): its path, or null when it is not installed. */
export function findNginx(): string | null {
  const candidates = [process.env.NGINX_BIN, '/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/bin/nginx'].filter((c): c is string => !!c);
  for (const candidate of candidates) if (existsSync(candidate)) return candidate;
  const which = spawnSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8' });
  const found = which.stdout.trim();
  return which.status === 0 && found !== '' ? found : null;
}

export interface RunningNginx {
  readonly child: ChildProcess;
  readonly version: string;
  stop(): Promise<void>;
}

/** Writes both files under `dir`, checks them with `nginx -t`, and starts nginx in the foreground. */
export function startNginx(binary: string, dir: string, rendered: string): RunningNginx {
  mkdirSync(dir, { recursive: true });
  const included = path.join(dir, 'gateway.conf');
  const main = path.join(dir, 'nginx.conf');
  writeFileSync(included, rendered);
  writeFileSync(main, mainNginxConf(dir, included));
  const args = ['-p', dir, '-c', main, '-e', path.join(dir, 'error.log')];
  const test = spawnSync(binary, [...args, '-t'], { encoding: 'utf8' });
  if (test.status !== 0) throw new Error(`nginx -t refused the configuration:\n${test.stderr}`);
  const version = /nginx version: nginx\/(\S+)/.exec(spawnSync(binary, ['-v'], { encoding: 'utf8' }).stderr)?.[1] ?? 'unknown';
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  // SIGTERM: nginx's fast shutdown, its workers with it.
  stopWithTheCheck(child, 'SIGTERM');
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    version,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGQUIT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
      if (stderr.trim() !== '') process.stderr.write(`nginx: ${stderr}`);
    },
  };
}
