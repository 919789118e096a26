import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError } from './errors/api-error';

// What Node's HTTP parser refuses (headers too large, garbage, a request that never came
// whole) never reaches a handler: it is answered on the socket, in the error shape with
// Cache-Control: no-store, on every listener of a process (the API's port, METRICS_PORT).

/** Within how long a request's headers and body must have arrived (then 408). */
export const REQUEST_TIMEOUT_MS = 60_000;

/** The responses of each connection not yet closed (trackResponses): what a connection still owes when its next bytes are not HTTP. */
const OPEN_RESPONSES = new WeakMap<Socket, Set<ServerResponse>>();

export function trackResponses(server: Server): void {
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    let open = OPEN_RESPONSES.get(request.socket);
    if (!open) OPEN_RESPONSES.set(request.socket, (open = new Set()));
    open.add(response);
    response.once('close', () => open.delete(response));
  });
}

/** The status clientErrorHandler wrote on a connection: the answer of the request it cut off (a 408 for a body that never came whole). */
const RAW_ANSWERS = new WeakMap<Socket, number>();

/** The status of the raw answer written on the connection, if any. */
export const rawAnswerOf = (socket: Socket): number | undefined => RAW_ANSWERS.get(socket);

/** How long a connection answered with raw bytes is left for its client to read them and close its side. */
const RAW_ANSWER_LINGER_MS = 5_000;

/**
 * Writes a raw answer and closes the connection: `end` closes only this side, and a
 * client that never closes its own would hold the socket for the life of the process
 * (no request is left to time out on it). Destroyed after the linger, not at once: a
 * reset could cut off the answer before the client has read it.
 */
export function endRaw(socket: Socket, text: string): void {
  socket.end(text);
  setTimeout(() => socket.destroy(), RAW_ANSWER_LINGER_MS).unref();
}

/** An error answer as the bytes written on a socket no response owns, closing the connection. */
export const rawErrorAnswer = (error: ApiError, reason: string): string => {
  const body = JSON.stringify(error.body());
  return (
    `HTTP/1.1 ${error.status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    Object.entries(error.headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('') +
    `Cache-Control: no-store\r\nX-Request-Id: ${randomUUID()}\r\nConnection: close\r\n\r\n${body}`
  );
};

/** The answer to a request Node's HTTP parser refused: too large, too slow, or not HTTP. */
function clientErrorAnswer(code: string | undefined): { error: ApiError; reason: string } {
  if (code === 'HPE_HEADER_OVERFLOW') {
    return { error: new ApiError(431, 'validation', 'Заголовки или адрес запроса слишком длинные', 'request'), reason: 'Request Header Fields Too Large' };
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'ERR_HTTP_HEADERS_TIMEOUT') {
    return {
      error: new ApiError(408, 'request_timeout', 'Запрос не был получен целиком за 60 секунд: отправьте его снова', 'request'),
      reason: 'Request Timeout',
    };
  }
  return { error: new ApiError(400, 'validation', 'Некорректный HTTP-запрос', 'request'), reason: 'Bad Request' };
}

/** A server's `clientError` handler (Fastify's clientErrorHandler): the answer above, after what the connection still owes. */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (!socket.writable) return void socket.destroy();
  const answer = clientErrorAnswer(error.code);
  RAW_ANSWERS.set(socket, answer.error.status);
  const text = rawErrorAnswer(answer.error, answer.reason);
  // The requests read whole before the bad bytes (pipelined on the connection) are
  // answered first: they were carried out. One whose body never came whole (a timeout,
  // a bad chunk) is not waited for.
  const owed = [...(OPEN_RESPONSES.get(socket) ?? [])].filter((res) => res.req.complete && !res.writableFinished);
  void Promise.all(owed.map((res) => new Promise((done) => res.once('close', done)))).then(() => endRaw(socket, text));
}
