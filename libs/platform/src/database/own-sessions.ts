import type { Client } from 'pg';

/**
 * The sessions this process's pools (createPool) hold open now: when it leaves an
 * embedded server, its own serving sessions are not another process's (see
 * LEGACY_PRESENCE_NAMES in embedded-postgres.ts). Per thread: a worker's pools are its own.
 */
const open = new Set<Client>();
/**
 * Server processes of sessions this process ended lately, and when: a pool ended just
 * before the server is left (infrastructure's close) may still be listed by the server
 * for a moment while its backends exit, and must not count as another process.
 */
const ended = new Map<string, number>();
const ENDED_KEPT_MS = 10_000;

const backendOf = (client: Client): { pid: number | null; port: number } => {
  const { processID, port } = client as unknown as { processID: number | null; port: number };
  return { pid: processID, port: Number(port) };
};

/** Counts `client` as this process's own until its connection ends, and for a while after. */
export function trackOwnSession(client: Client): void {
  open.add(client);
  client.once('end', () => {
    open.delete(client);
    const { pid, port } = backendOf(client);
    if (pid !== null) ended.set(`${port}:${pid}`, Date.now());
  });
}

/** The server processes (backend pids) of this process's sessions to the server on `port`: open now, or ended lately. */
export function ownSessionBackends(port: number): number[] {
  const pids: number[] = [];
  for (const client of open) {
    const { pid, port: itsPort } = backendOf(client);
    if (pid !== null && itsPort === port) pids.push(pid);
  }
  const now = Date.now();
  for (const [key, at] of ended) {
    if (now - at > ENDED_KEPT_MS) ended.delete(key);
    else if (key.startsWith(`${port}:`)) pids.push(Number(key.slice(key.indexOf(':') + 1)));
  }
  return pids;
}

/** Closes the sockets of this process's sessions at once (at exit: no other process must find them still open). */
export function dropOwnSessions(): void {
  for (const client of open) {
    const { pid, port } = backendOf(client);
    if (pid !== null) ended.set(`${port}:${pid}`, Date.now());
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  }
  open.clear();
}
