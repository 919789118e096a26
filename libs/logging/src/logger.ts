import pino, { Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * Structured JSON logs on stdout. LOG_LEVEL sets the level (default info; tests
 * default to silent unless LOG_LEVEL is set).
 */
export function createLogger(name: string, level?: string): Logger {
  const fallback = process.env.JEST_WORKER_ID ? 'silent' : 'info';
  return pino({ name, level: level ?? process.env.LOG_LEVEL ?? fallback, base: { service: name } });
}

/** A logger that writes nothing (for tools and tests). */
export const silentLogger: Logger = pino({ level: 'silent' });
