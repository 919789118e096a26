/**
 * Makes one stream's append fail inside a real gateway, the way production makes it
 * fail: the test holds the stream's append lock (the per-stream advisory lock of the
 * PostgreSQL event store, decision 0099), and once a gateway session waits for it, that
 * session's statement is cancelled (what the statement timeout does) or the session is
 * terminated (what a database restart or a killed backend does). Appends to every
 * other stream go on, so the steps of a command before that append commit as usual.
 */
import { Client } from 'pg';
import { STREAM_APPEND_LOCK_NAMESPACE } from '#event-store/postgres';
import { sleep } from './merchant-fixtures';

export type AppendBreak = 'cancel' | 'terminate';

/**
 * Runs `request` while `streamName`'s append lock is held, breaking every gateway
 * session that waits for it (`how`) until the request answers; then lets the lock go.
 * Answers the request's answer. A request that appends there itself must have been
 * broken at least once, or this throws; with `appendedBy: 'reactor'` the append is a
 * reactor's, which may be in its back-off while the request runs.
 */
export async function withAppendBroken<T>(
  databaseUrl: string,
  streamName: string,
  how: AppendBreak,
  request: () => Promise<T>,
  appendedBy: 'request' | 'reactor' = 'request',
): Promise<T> {
  const holder = new Client({ connectionString: databaseUrl, application_name: 'append-lock-holder' });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [STREAM_APPEND_LOCK_NAMESPACE, streamName]);
    let answered = false;
    const inFlight = request().finally(() => (answered = true));
    let broken = 0;
    const deadline = Date.now() + 30_000;
    while (!answered) {
      if (Date.now() > deadline) throw new Error(`no gateway session waited for the append lock of ${streamName} within 30 s`);
      const waiting = await holder.query<{ pid: number }>(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = $1::oid AND objid = hashtext($2)::oid AND pid <> pg_backend_pid()`,
        [STREAM_APPEND_LOCK_NAMESPACE, streamName],
      );
      for (const { pid } of waiting.rows) {
        await holder.query(how === 'cancel' ? 'SELECT pg_cancel_backend($1)' : 'SELECT pg_terminate_backend($1)', [pid]);
        broken++;
      }
      await sleep(10);
    }
    const answer = await inFlight;
    if (broken === 0 && appendedBy === 'request') throw new Error(`the request answered without appending to ${streamName}`);
    return answer;
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
  }
}

/** A stream's append lock held by the test until `release`, so that gateway sessions queue for it in the order they come. */
export interface HeldAppendLock {
  /** Waits until `count` gateway sessions wait for the lock (30 s at most). */
  waitedForBy(count: number): Promise<void>;
  /** Lets the lock go: the waiting sessions append, in the order they came. */
  release(): Promise<void>;
}

/** Takes `streamName`'s append lock (see withAppendBroken) and holds it, breaking nothing. */
export async function holdAppendLock(databaseUrl: string, streamName: string): Promise<HeldAppendLock> {
  const holder = new Client({ connectionString: databaseUrl, application_name: 'append-lock-holder' });
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [STREAM_APPEND_LOCK_NAMESPACE, streamName]);
  let released = false;
  return {
    async waitedForBy(count) {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const waiting = await holder.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = $1::oid AND objid = hashtext($2)::oid`,
          [STREAM_APPEND_LOCK_NAMESPACE, streamName],
        );
        if (waiting.rows[0]!.n >= count) return;
        if (Date.now() > deadline) throw new Error(`${count} gateway sessions did not wait for the append lock of ${streamName} within 30 s`);
        await sleep(10);
      }
    },
    async release() {
      if (released) return;
      released = true;
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    },
  };
}
