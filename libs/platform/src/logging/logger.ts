import pino, { Logger } from 'pino';

export type { Logger } from 'pino';
export { REQUEST_ID_HEADER, requestIdOf } from './request-id';

/** The field every log line written while handling an HTTP request carries. */
export const REQUEST_ID_LOG_FIELD = 'requestId';

/**
 * Structured JSON logs on stdout. LOG_LEVEL sets the level (default info, also under a
 * test runner: a test that wants quiet sets it). The API logs through per-request
 * children of this logger (`request.log`), which add `requestId` to each line.
 */
export function createLogger(name: string, level?: string): Logger {
  return pino({ name, level: level ?? (process.env.LOG_LEVEL?.trim() || 'info'), base: { service: name } });
}

/**
 * Ends the process once every line logged so far is written. pino writes stdout
 * through libuv's thread pool; on `process.exit` a write still queued there comes out
 * after the lines pino's exit hook writes at once, so the last line ("stopped") could
 * come before the one logged ahead of it. `flush(cb)` calls back at once (pino's
 * `minLength` is 0); ending the stream waits for the queued writes.
 */
export function exitAfterLogs(log: Logger, code: number): void {
  // A stdout nobody reads may never finish: exit anyway.
  setTimeout(() => process.exit(code), 2_000);
  const stream = (log as unknown as Record<symbol, Partial<Pick<NodeJS.WritableStream, 'end' | 'once'>>>)[pino.symbols.streamSym];
  if (typeof stream?.end !== 'function' || typeof stream.once !== 'function') process.exit(code);
  stream.once('close', () => process.exit(code));
  stream.end();
}

/** A logger that writes nothing (for tools and tests). */
export const silentLogger: Logger = pino({ level: 'silent' });
