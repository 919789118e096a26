import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';

/**
 * How long an API process that stops waits for the proxy in front of it to close its
 * idle keep-alive connections (deploy/nginx.conf closes them after 4 s).
 */
export const PROXY_DRAIN_MS = 10_000;
/** How long a stop without a proxy waits for a connection that has sent nothing yet. */
const SILENT_GRACE_MS = 1_000;

export interface ConnectionDrain {
  /**
   * Stops accepting connections and resolves once every open connection is closed:
   * requests still arriving on them are served, each answered with `Connection:
   * close`. Idle connections are closed at once (those that never sent a byte after a
   * second, a request half sent at `boundMs`), or, when `waitForClients`, left for their
   * clients to close, up to `boundMs`.
   */
  drain(options: { readonly waitForClients: boolean; readonly boundMs?: number }): Promise<void>;
}

/**
 * The stop of an HTTP server without an error for its clients. Closing a keep-alive
 * connection that looks idle can cross a request the client is sending on it at that
 * moment; a proxy (nginx) then answers that request with an error and, for a POST
 * that may have reached the server, cannot send it elsewhere. So behind a proxy the
 * server stops listening (the proxy's new connections are refused and go to another
 * replica), serves what still comes on the open connections with `Connection: close`
 * (the proxy then closes them), and leaves the idle ones for the proxy to close. Node's
 * own `server.close()` closes idle connections at once, and Fastify's close answers
 * requests on open connections with 503: both run only after the drain, when no
 * connection is left.
 */
export function connectionDrain(server: Server): ConnectionDrain {
  let draining = false;
  /** Answers being written when the drain starts get `Connection: close` too. */
  const answering = new Set<ServerResponse>();
  /**
   * Each open connection's requests not yet answered. One with none, or whose requests
   * have not all come in whole (a body still arriving; the next request's first bytes
   * are not one yet), is not being served: Node counts it busy all the same, so closing
   * the idle ones spares it.
   */
  const unanswered = new Map<Socket, Set<IncomingMessage>>();
  server.on('connection', (socket: Socket) => {
    unanswered.set(socket, new Set());
    socket.once('close', () => unanswered.delete(socket));
  });
  // First of the request listeners, so that the header is set before any answer is written.
  server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
    const requests = unanswered.get(request.socket);
    requests?.add(request);
    if (draining) response.setHeader('connection', 'close');
    else answering.add(response);
    // One pair of listeners per answer for both records (this runs for every request).
    const answered = () => {
      requests?.delete(request);
      answering.delete(response);
    };
    response.once('finish', answered);
    response.once('close', answered);
  });
  return {
    async drain({ waitForClients, boundMs = PROXY_DRAIN_MS }) {
      draining = true;
      // 'close' comes once the server no longer listens and its last connection has closed.
      const closed = new Promise<void>((resolve) => server.once('close', () => resolve()));
      await acceptQueuedConnections(server);
      // net.Server's close only stops listening; http.Server's would also close the idle connections.
      NetServer.prototype.close.call(server);
      const closeIdle = () => server.closeIdleConnections();
      for (const response of answering) {
        if (!response.headersSent) response.setHeader('connection', 'close');
        // Its head went out as keep-alive: the connection is idle once the answer is done.
        else if (!waitForClients) response.once('finish', () => setImmediate(closeIdle));
      }
      let bound: NodeJS.Timeout | undefined;
      if (waitForClients) bound = setTimeout(closeIdle, boundMs);
      else closeIdle();
      // A connection that has not sent a whole request would hold the stop until Node's
      // timeouts (60 s), past the forced stop: one that has sent nothing (a browser's
      // preconnect) is closed after a second without a proxy, and with the idle ones behind
      // one; one with part of a request in is left to finish it until the bound (10 s).
      const closeUnserved = (unsent: boolean) =>
        unanswered.forEach((requests, socket) => {
          const served = [...requests].some((request) => request.complete);
          if (!served && (!unsent || (requests.size === 0 && socket.bytesRead === 0))) socket.destroy();
        });
      const unsentBound = waitForClients ? undefined : setTimeout(() => closeUnserved(true), SILENT_GRACE_MS);
      // Past the bound, looked at again every second: an answer that ends later leaves its
      // connection with the next request's first bytes, which Node's idle close spares.
      let pastBound: NodeJS.Timeout | undefined;
      const partBound = setTimeout(() => {
        closeUnserved(false);
        pastBound = setInterval(() => closeUnserved(false), 1_000);
      }, boundMs);
      await closed;
      clearTimeout(bound);
      clearTimeout(unsentBound);
      clearTimeout(partBound);
      clearInterval(pastBound);
    },
  };
}

/**
 * Closing a listening socket resets the connections that wait in the kernel's accept
 * queue, with the request the proxy already wrote on them (nginx cannot resend a POST).
 * So the listener closes only after a turn of the event loop in which no connection was
 * accepted (at most 20 turns): what was queued is taken and served with `Connection: close`.
 */
async function acceptQueuedConnections(server: Server): Promise<void> {
  let accepted = 0;
  const count = () => (accepted += 1);
  server.on('connection', count);
  try {
    for (let turn = 0; turn < 20; turn += 1) {
      const before = accepted;
      // Two immediates: the second runs after a poll phase of the loop, where accepts happen.
      await new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));
      if (accepted === before && turn > 0) return;
    }
  } finally {
    server.off('connection', count);
  }
}
