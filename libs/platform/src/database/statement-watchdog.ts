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

/** A `statement_timeout` value in milliseconds (`5000`, `5s`, `1min`), null when this cannot read it. */
function durationMs(text: string): number | null {
  const value = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text);
  const unit = value ? UNITS_MS[value[2]!.toLowerCase()] : undefined;
  return value && unit !== undefined ? Math.round(Number(value[1]) * unit) : null;
}

/**
 * The `statement_timeout` in milliseconds that the last of `options` (startup options
 * as PostgreSQL reads them: `-c name=value` or `--name=value`) sets, `undefined` when
 * none sets it, `null` when one sets it to a value this cannot read.
 */
export function statementTimeoutIn(options: string): number | null | undefined {
  let found: number | null | undefined;
  for (const match of options.matchAll(/(?:-c\s*|--)statement[-_]timeout\s*=\s*'?([^\s']*)/g)) found = durationMs(match[1]!);
  return found;
}

/**
 * How a query's text changes the session's bound, when the text is one statement
 * `SET [SESSION|LOCAL] statement_timeout = v` / `TO v` or `RESET statement_timeout` /
 * `RESET ALL` (`ms` null: back to the session's start value; NaN: a value this cannot
 * read). A text of several statements, or one that only mentions the setting, changes
 * nothing here; nor does a SET undone by its transaction's ROLLBACK (the gateway lifts
 * its bound outside transactions or with SET LOCAL).
 */
export function statementBoundChange(text: string): { local: boolean; ms: number | null } | null {
  const set = /^\s*SET\s+(SESSION\s+|LOCAL\s+)?statement[_-]timeout\s*(?:=|TO)\s*(?:'([^']*)'|([^\s;']+))\s*(?:;\s*)?$/i.exec(text);
  if (set) {
    const value = set[2] ?? set[3]!;
    return { local: /LOCAL/i.test(set[1] ?? ''), ms: /^default$/i.test(value) ? null : (durationMs(value.trim()) ?? NaN) };
  }
  return /^\s*RESET\s+(?:statement[_-]timeout|ALL)\s*(?:;\s*)?$/i.test(text) ? { local: false, ms: null } : null;
}

/**
 * Ends the connection of `client` when a statement sent on it has had no answer for
 * its session's `statement_timeout` (`startMs` from the startup options, then as the
 * session sets it; 0: no bound, not watched) plus UNANSWERED_MARGIN_MS. Without this a
 * request whose statement went to a server that stopped answering (SIGSTOP, a frozen
 * VM: its kernel still acknowledges TCP, so keepalive sees nothing) waits for good.
 * The statement then fails as a lost connection, which the callers already treat as
 * "may have been written" (WriteOutcomeUnknownError, AppendOutcomeUnknownError) or as
 * the database not answering (503), and the pool drops the client. Hand-written:
 * node-postgres's `query_timeout` leaves the connection in use, knows nothing of a
 * session that lifts its bound (migrations, index builds), and a timed-out COMMIT
 * would read as if it wrote nothing.
 */
export function watchStatements(client: Client, startMs: number): void {
  // node-postgres's connection (its socket and protocol messages): not in its typings.
  const connection = (client as unknown as { connection: EventEmitter & { stream: Socket } }).connection;
  const busy = () => (client as unknown as { readyForQuery: boolean }).readyForQuery === false;
  let session = startMs;
  let local: number | null = null;
  let timer: NodeJS.Timeout | null = null;
  let armedFor = 0;
  const expire = () => {
    timer = null;
    if (busy()) connection.stream.destroy();
  };
  const stop = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  };
  // A statement starts: the deadline counts from now (none while the session has no bound).
  const started = () => {
    const bound = local ?? session;
    if (!(bound > 0)) return stop();
    const deadline = bound + UNANSWERED_MARGIN_MS;
    if (timer !== null && armedFor === deadline) timer.refresh();
    else {
      stop();
      timer = setTimeout(expire, deadline).unref();
      armedFor = deadline;
    }
  };
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: unknown } | null)?.text;
    const change = typeof text === 'string' && /^\s*(?:SET|RESET)\b/i.test(text) ? statementBoundChange(text) : null;
    if (change) {
      // A session that lifts or changes its bound is watched by it (an unreadable value: not watched).
      const ms = change.ms === null ? startMs : Number.isNaN(change.ms) ? 0 : change.ms;
      if (change.local) local = ms;
      else session = ms;
    }
    const wasBusy = busy();
    const result = query(...args);
    if (!wasBusy && busy()) started();
    return result;
  };
  // Each answered statement: the next one queued (sent by now) starts its own count.
  connection.on('readyForQuery', (message: { status?: string }) => {
    // Out of a transaction: a SET LOCAL ended with it.
    if (message?.status === 'I') local = null;
    if (busy()) started();
    else stop();
  });
  client.once('end', stop);
}
