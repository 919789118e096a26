import pino, { Logger } from 'pino';

export type { Logger } from 'pino';
export { REQUEST_ID_HEADER, requestIdOf } from './request-id';

/** The field every log line written while handling an HTTP request carries. */
export const REQUEST_ID_LOG_FIELD = 'requestId';

/**
 * Structured JSON logs on stdout. LOG_LEVEL sets the level (default info; tests
 * default to silent unless LOG_LEVEL is set). The API logs through per-request
 * children of this logger (`request.log`), which add `requestId` to each line.
 */
export function createLogger(name: string, level?: string): Logger {
  const fallback = process.env.JEST_WORKER_ID ? 'silent' : 'info';
  return pino({ name, level: level ?? (process.env.LOG_LEVEL?.trim() || fallback), base: { service: name } });
}

/** A logger that writes nothing (for tools and tests). */
export const silentLogger: Logger = pino({ level: 'silent' });
