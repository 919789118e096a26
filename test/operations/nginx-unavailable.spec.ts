/**
 * deploy/nginx.conf's 503 when no replica answered (docs/api.md, "What is safe to
 * retry"): a request that never reached a replica was not done, and its 503 says to
 * send it again as it is; a write (POST, PATCH, PUT, DELETE) sent to a replica that
 * stopped before answering may have been done, and its 503 says so, as the gateway's
 * own AppendOutcomeUnknownError does: retry only with the same Idempotency-Key. Before,
 * both read "nothing done", and a refund retried so was made twice.
 *
 * Debian's nginx runs the documented file with only its addresses substituted (as `npm
 * run deploy:check` runs it), in front of a replica that reads each request and dies.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, Server, Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { findNginx, renderNginxConf, RunningNginx, startNginx } from '../../scripts/deploy-check/nginx';
import { freePort } from '../../scripts/deploy-check/processes';
import { ROOT } from '../support/gateway-process';

const nginx = findNginx();
const NOTHING_DONE = 'Сервис временно недоступен, повторите запрос позже';
const UNKNOWN = /записано ли что-то, неизвестно: повторяйте запрос с тем же Idempotency-Key/;

describe('deploy/nginx.conf when no replica answers', () => {
  if (!nginx) {
    console.warn('nginx 503 test skipped: nginx is not installed (Debian: apt-get install -y nginx; .ci/run installs it)');
    it.skip('tells a write a replica got from one that reached none (nginx is not installed)', () => undefined);
    return;
  }

  let dir: string;
  let running: RunningNginx;
  let replica: Server | null = null;
  let replicaPort: number;
  let base: string;
  const sockets = new Set<Socket>();

  /** A replica that reads a request's head and dies before answering (a SIGKILL mid-request). */
  const startDyingReplica = () =>
    new Promise<void>((resolve) => {
      replica = createServer((socket) => {
        sockets.add(socket);
        let head = '';
        socket.on('data', (chunk: Buffer) => {
          head += chunk.toString('latin1');
          if (head.includes('\r\n\r\n')) socket.destroy();
        });
        socket.on('close', () => sockets.delete(socket));
      });
      replica.listen(replicaPort, '127.0.0.1', () => resolve());
    });
  const stopReplica = () => new Promise<void>((resolve) => (replica ? replica.close(() => resolve()) : resolve()));

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nginx-503-'));
    replicaPort = await freePort();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const rendered = renderNginxConf(readFileSync(path.join(ROOT, 'deploy/nginx.conf'), 'utf8'), {
      listen: `127.0.0.1:${port}`,
      upstreams: [`127.0.0.1:${replicaPort}`],
    });
    running = startNginx(nginx, dir, rendered);
    for (let i = 0; ; i++) {
      try {
        await fetch(`${base}/health/live`);
        break;
      } catch (error) {
        if (i > 100) throw error;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await stopReplica();
    await running?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const send = async (method: string, body?: string) => {
    const res = await fetch(`${base}/v1/invoices/0f8ec6a5-0000-4000-8000-000000000001/refund`, {
      method,
      headers: { authorization: 'Bearer sk_test_x', 'content-type': 'application/json' },
      body,
    });
    return {
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      type: res.headers.get('content-type'),
      body: (await res.json()) as { error: { code: string; message: string } },
    };
  };

  it('a write a replica got and died on: 503 that says the outcome is unknown; a read: 503, nothing done', async () => {
    await startDyingReplica();
    for (const method of ['POST', 'PATCH']) {
      const answer = await send(method, '{"amount":"100.00"}');
      expect(answer).toMatchObject({ status: 503, retryAfter: '1', type: 'application/json; charset=utf-8' });
      expect(answer.body.error.code).toBe('provider_unavailable');
      expect(answer.body.error.message).toMatch(UNKNOWN);
    }
    const read = await send('GET');
    expect(read).toMatchObject({ status: 503, retryAfter: '1', body: { error: { code: 'provider_unavailable', message: NOTHING_DONE } } });
    await stopReplica();
  });

  it('a write that reached no replica (connection refused): 503, nothing done, safe to send again as it is', async () => {
    const answer = await send('POST', '{"amount":"100.00"}');
    expect(answer).toMatchObject({ status: 503, retryAfter: '1', body: { error: { code: 'provider_unavailable', message: NOTHING_DONE } } });
  });
});
