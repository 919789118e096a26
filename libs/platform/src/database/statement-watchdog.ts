import type { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import type { Client } from 'pg';

/**
 * How much longer than its `statement_timeout` a statement may go without an answer
 * before its connection is given up: a server that is alive answers a cancelled
 * statement at once, so only one that does not run at all (a frozen host or VM, a
 * stopped postmaster, a network that drops packets without a reset) lets it pass.
 */
export const UNANSWERED_MARGIN_MS = 5_000;

const UNITS_MS: Record<string, number> = { '': 1, us: 0.001, ms: 1, s: 1_000, min: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * The `statement_timeout` in milliseconds that the last of `options` (startup options
 * as PostgreSQL reads them: `-c name=value` or `--name=value`) sets, `undefined` when
 * none sets it, `null` when one sets it to a value this cannot read.
 */
export function statementTimeoutIn(options: string): number | null | undefined {
  let found: number | null | undefined;
  for (const match of options.matchAll(/(?:-c\s*|--)statement_timeout\s*=\s*'?([^\s']*)/g)) {
    const value = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(match[1]!);
    const unit = value ? UNITS_MS[value[2]!.toLowerCase()] : undefined;
    found = value && unit !== undefined ? Math.round(Number(value[1]) * unit) : null;
  }
  return found;
}

/**
 * Ends the connection of `client` when a statement sent on it has had no answer for
 * `deadlineMs`. Without this a request whose statement went to a server that stopped
 * answering (SIGSTOP, a frozen VM: its kernel still acknowledges TCP, so keepalive sees
 * nothing) waits for good. The statement then fails as a lost connection, which the
 * callers already treat as "may have been written" (WriteOutcomeUnknownError,
 * AppendOutcomeUnknownError) or as the database not answering (503), and the pool
 * drops the client. Hand-written: node-postgres's `query_timeout` leaves the
 * connection in use and a timed-out COMMIT reads as if it wrote nothing.
 */
export function watchStatements(client: Client, deadlineMs: number): void {
  // node-postgres's connection (its socket and protocol messages): not in its typings.
  const connection = (client as unknown as { connection: EventEmitter & { stream: Socket } }).connection;
  const busy = () => (client as unknown as { readyForQuery: boolean }).readyForQuery === false;
  let timer: NodeJS.Timeout | null = null;
  const expire = () => {
    timer = null;
    if (busy()) connection.stream.destroy();
  };
  const stop = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  };
  // A statement starts: the deadline counts from now.
  const started = () => {
    if (timer === null) timer = setTimeout(expire, deadlineMs).unref();
    else timer.refresh();
  };
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const wasBusy = busy();
    const result = query(...args);
    if (!wasBusy && busy()) started();
    return result;
  };
  // Each answered statement: the next one queued (sent by now) starts its own count.
  connection.on('readyForQuery', () => {
    if (busy()) started();
    else stop();
  });
  client.once('end', stop);
}
