import { isUtf8 } from 'node:buffer';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, LONGEST_ECHOED_PATH } from './errors/api-error';
import { duplicateJsonName } from './duplicate-json-names';
import { RAW_BODIES } from './number-literals';

/**
 * What the merchant and operator APIs check of a request's bytes before any route,
 * guard or parser of theirs: its media type and coding, its query string's escapes,
 * and its JSON body's encoding and field names. Each refusal is the spec's error shape.
 */
export function registerRequestChecks(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', refuseUnreadableApiRequests);
  fastify.addHook('preValidation', refuseUnreadableBodies);
}

/** An error of the APIs sent from a hook or a Fastify handler, outside Nest's filters. */
export const sendError = (reply: FastifyReply, error: ApiError) =>
  reply.status(error.status).header('cache-control', 'no-store').header('content-type', 'application/json; charset=utf-8').send(error.body());

/**
 * The pattern of the route that took the request (`/v1/invoices/:id/refund`), or null
 * when none did. What a request is decided by: the router matches the decoded path, so
 * `/%761/invoices` reaches the /v1 route while its raw URL does not start with /v1/.
 */
export const routeOf = (request: FastifyRequest): string | null => (request.is404 ? null : (request.routeOptions.url ?? null));

/** The media type of a request's body, without its parameters, in lower case ('' without a Content-Type). */
const mediaTypeOf = (request: FastifyRequest) => (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();

/**
 * One hook, before any parser, for the requests of the merchant and operator APIs (the
 * payment page under /pay and the operator console under /admin, outside /admin/v1,
 * keep their forms): their body's media type and coding, then their query string.
 * A request no route takes is not judged here: its 404 or 405 (the error filter's
 * routeMiss) says what is wrong, not its body.
 */
function refuseUnreadableApiRequests(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const route = routeOf(request);
  const api = route !== null && (route.startsWith('/v1/') || route.startsWith('/admin/v1/'));
  const refusal = api ? (bodyTypeRefusal(request) ?? queryRefusal(request.url)) : null;
  if (refusal) {
    void sendError(reply, refusal);
    return;
  }
  done();
}

/**
 * The APIs take JSON only: a body of another type or of two, or sent with a content
 * coding (gzip, br: Fastify would parse the coded bytes as they came), is refused with 415. So is an
 * empty one labelled as another type (`curl -d "$AMOUNT"` with the variable empty sends
 * a form): read as no body, a refund whose amount was lost would be a full one.
 */
function bodyTypeRefusal(request: FastifyRequest): ApiError | null {
  const hasBody = Number(request.headers['content-length'] ?? 0) > 0 || request.headers['transfer-encoding'] !== undefined;
  const labelled = request.headers['content-type'] !== undefined && request.method !== 'GET' && request.method !== 'HEAD';
  if (!hasBody && !labelled) return null;
  // Node keeps the first of two Content-Types, a proxy may read the other: no one media type, so none the APIs take.
  if (contentTypes(request) > 1) {
    return new ApiError(415, 'unsupported_media_type', 'Заголовок Content-Type указан дважды: передайте один, application/json');
  }
  if (mediaTypeOf(request) !== 'application/json') return new ApiError(415, 'unsupported_media_type', 'Тело запроса должно быть в формате application/json');
  const coding = (request.headers['content-encoding'] ?? '').trim().toLowerCase();
  if (coding !== '' && coding !== 'identity') {
    return new ApiError(415, 'unsupported_media_type', 'Тело запроса принимается без сжатия: Content-Encoding не поддерживается');
  }
  return null;
}

/** How many Content-Type headers the request has (Node keeps only the first). */
function contentTypes(request: FastifyRequest): number {
  const raw = request.raw.rawHeaders;
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === 'content-type') count++;
  return count;
}

/** A component of a query string as text (`+` a space), or null when a percent-escape in it is not UTF-8 (`%E9`, `%zz`). */
function decodedComponent(text: string): string | null {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return null;
  }
}

/**
 * A query string of the APIs is UTF-8 text, as a path is: a percent-escape that does
 * not decode is refused with 400 naming its field, where the query parser keeps it as
 * written, so that `?orderId=%E9` found the invoice whose orderId is the text `%E9`.
 */
function queryRefusal(url: string): ApiError | null {
  const at = url.indexOf('?');
  if (at < 0 || !url.includes('%', at)) return null;
  for (const pair of url.slice(at + 1).split('&')) {
    const eq = pair.indexOf('=');
    const name = decodedComponent(eq < 0 ? pair : pair.slice(0, eq));
    if (name !== null && (eq < 0 || decodedComponent(pair.slice(eq + 1)) !== null)) continue;
    const param = name ?? 'query';
    return new ApiError(400, 'validation', `${param}: неверная %-последовательность, текст должен быть в кодировке UTF-8`, param);
  }
  return null;
}

/**
 * A JSON body whose bytes are not UTF-8 is refused (RFC 8259: JSON between systems is
 * UTF-8): read as text, each bad byte would become U+FFFD, and two different orderIds
 * one. A JSON body that names one field twice is refused: JSON.parse keeps the last
 * value, and a proxy that inspects or signs the body may have read the first. The
 * raw bytes of the others are kept by their parsed body, for the money rules.
 */
function refuseUnreadableBodies(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const raw = (request as FastifyRequest & { rawBody?: Buffer }).rawBody;
  const json = mediaTypeOf(request) === 'application/json' && !request.is404;
  if (json && raw !== undefined && !isUtf8(raw)) {
    void sendError(reply, new ApiError(400, 'validation', 'Тело запроса не является корректным JSON: текст должен быть в кодировке UTF-8', 'body'));
    return;
  }
  const body = json && raw !== undefined && typeof request.body === 'object' && request.body !== null ? request.body : null;
  if (body !== null) RAW_BODIES.set(body, raw!);
  const name = body !== null ? duplicateJsonName(raw!.toString('utf8')) : null;
  if (name !== null) {
    // A path too long to echo (a long name, deep nesting) is not: the body is named instead.
    const param = name.length > LONGEST_ECHOED_PATH ? 'body' : name;
    const message = param === name ? `${name}: поле указано в теле запроса дважды` : 'body: одно из полей (путь длиннее 200 символов) указано дважды';
    void sendError(reply, ApiError.validation([{ param, code: 'duplicate_field', message }]));
    return;
  }
  done();
}
