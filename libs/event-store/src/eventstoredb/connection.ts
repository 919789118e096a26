import { EventStoreDBClient } from '@eventstore/db-client';
import type { Credentials } from '@eventstore/db-client';
import { parseConnectionString } from '@eventstore/db-client/dist/Client/parseConnectionString';

/**
 * How the adapter calls the client, read from the connection string with the
 * client's own parser.
 */
export interface EventStoreDbSettings {
  /**
   * The deadline of every call except subscriptions, in milliseconds: the connection
   * string's `defaultDeadline` (the client's own deadline for appends), else 10 s.
   * The client gives reads none (an infinite gRPC deadline), so the adapter enforces
   * it on reads itself.
   */
  readonly deadlineMs: number;
  /** What keeps appends off the client's batch-append stream (see appendRoute). */
  readonly appendRoute: AppendRoute;
}

/**
 * In @eventstore/db-client 6.2.1 `appendToStream` takes the batch-append stream
 * whenever the server supports it and the call carries no `credentials` of its own.
 * That stream keeps the pending appends of the whole process in one module-level
 * map: an error on it rejects every pending append (some of which committed) and
 * clears the map, and a reply that arrives afterwards makes its `data` listener
 * throw a TypeError, an uncaught exception that ends the process. The adapter never
 * takes that path:
 * - `credentials`: the call passes credentials of its own, which makes the client use
 *   its plain `append` call (one gRPC call per append, with a deadline). These are the
 *   connection string's `user:password`; on a connection without TLS, where the client
 *   ignores credentials and sends none, an empty pair;
 * - `direct`: a TLS connection without `user:password` (anonymous, or X.509 user
 *   certificates) has no credentials to pass that would not change who is calling, so
 *   the adapter calls the client's plain `append` itself.
 * @kurrent/kurrentdb-client, the maintained successor of the client, keeps the
 * pending appends per stream and drops unknown replies.
 */
export type AppendRoute = { readonly kind: 'credentials'; readonly credentials: Credentials } | { readonly kind: 'direct' };

export const DEFAULT_DEADLINE_MS = 10_000;

export function settingsFromConnectionString(connectionString: string): EventStoreDbSettings {
  const options = parseConnectionString(connectionString);
  return {
    deadlineMs: options.defaultDeadline ?? DEFAULT_DEADLINE_MS,
    appendRoute: appendRoute(options),
  };
}

export function appendRoute(options: { readonly tls?: boolean; readonly defaultCredentials?: Credentials }): AppendRoute {
  if (options.defaultCredentials) return { kind: 'credentials', credentials: options.defaultCredentials };
  if (options.tls === false) return { kind: 'credentials', credentials: { username: '', password: '' } };
  return { kind: 'direct' };
}

/**
 * Why the client would refuse this connection string at start, or null when it
 * accepts it: the check is the client's own (its parser, then the construction of the
 * client, which also reads the certificate files and checks deadlines and
 * keep-alives), so configuration accepts exactly what the client accepts. The
 * client's parser names a position and what it expected there; the text at that
 * position is left out, as it may be part of a password.
 */
export function connectionStringProblem(connectionString: string): string | null {
  try {
    parseConnectionString(connectionString);
  } catch (error) {
    const { location, expected } = error as { location?: unknown; expected?: unknown };
    if (Array.isArray(location) && typeof location[0] === 'number' && typeof expected === 'string') {
      return `at character ${location[0] + 1}: expected ${expected}`;
    }
    return (error as Error).message;
  }
  try {
    // Creating the client opens no connection (that happens on the first call).
    EventStoreDBClient.connectionString(connectionString);
  } catch (error) {
    return (error as Error).message;
  }
  return null;
}
