import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connectionDrain } from './connection-drain';

/** A client in a process of its own: writes a POST, marks the file once written, prints what came back. */
const CLIENT = `
const net = require('node:net');
const fs = require('node:fs');
const [port, marker] = process.argv.slice(1);
const socket = net.connect(Number(port), '127.0.0.1', () => {
  socket.write('POST /v1/refunds HTTP/1.1\\r\\nHost: gateway\\r\\nContent-Length: 2\\r\\n\\r\\n{}', () => fs.writeFileSync(marker, ''));
});
let answer = '';
socket.on('data', (chunk) => (answer += chunk));
socket.on('error', (error) => { process.stdout.write('error ' + error.code); process.exit(0); });
socket.on('close', () => { process.stdout.write(answer.split('\\r\\n')[0]); process.exit(0); });
`;

describe('connection drain', () => {
  let server: Server;
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'drain-'));
    server = createServer((request, response) => {
      request.resume();
      request.on('end', () => response.end('{}'));
    });
    // As the API's (Fastify's default): an idle kept-alive connection stays open that long.
    server.keepAliveTimeout = 72_000;
  });
  afterEach(() => {
    server.closeAllConnections();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves a request whose connection waits in the accept queue when the drain starts, not resets it', async () => {
    const drain = connectionDrain(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const marker = path.join(dir, 'written');
    const client = spawn(process.execPath, ['-e', CLIENT, String(port), marker], { stdio: ['ignore', 'pipe', 'inherit'] });
    let printed = '';
    client.stdout.on('data', (chunk: Buffer) => (printed += chunk.toString()));
    const exited = new Promise<void>((resolve) => client.once('exit', () => resolve()));
    // The event loop is held while the client connects and writes: the kernel completes the
    // connection, which waits in the accept queue, as one a proxy opened just before a SIGTERM.
    const deadline = Date.now() + 10_000;
    while (!existsSync(marker) && Date.now() < deadline);
    expect(existsSync(marker)).toBe(true);
    const drained = drain.drain({ waitForClients: true, boundMs: 2_000 });
    await exited;
    await drained;
    expect(printed).toBe('HTTP/1.1 200 OK');
  });

  /** The server listening under a drain, and a client it has accepted; `closed` once the server closes it. */
  async function acceptedClient() {
    const drain = connectionDrain(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const accepted = new Promise<void>((resolve) => server.once('connection', () => resolve()));
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    client.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    await accepted;
    return { drain, client, closed };
  }
  /** How the drain ended: well under Node's header timeout (which held the stop before), well over the bounds tested. */
  const within10s = (drained: Promise<void>) =>
    Promise.race([drained.then(() => 'drained'), new Promise((resolve) => setTimeout(() => resolve('still waiting after 10 s'), 10_000).unref())]);

  it.each([
    ['without a proxy', { waitForClients: false }],
    ['behind a proxy, at the bound', { waitForClients: true, boundMs: 300 }],
  ])("closes a connection that never sent a request (a preconnect), %s, instead of waiting for Node's 60 s header timeout", async (_, options) => {
    const { drain, closed } = await acceptedClient();
    expect(await within10s(drain.drain(options))).toBe('drained');
    await closed;
  });

  it.each([
    ['a request line begun', ['G']],
    ['a body stopped short', ['POST /v1/invoices HTTP/1.1\r\nHost: gateway\r\nContent-Length: 10\r\n\r\n{']],
    ['a second request begun on a kept-alive connection', ['GET /v1/balance HTTP/1.1\r\nHost: gateway\r\n\r\n', 'G']],
  ])('closes a connection with %s at the bound, not at the forced stop', async (_, parts) => {
    const { drain, client, closed } = await acceptedClient();
    client.resume();
    for (const part of parts) {
      client.write(part);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await within10s(drain.drain({ waitForClients: false, boundMs: 1_500 }))).toBe('drained');
    await closed;
  });

  it('closes a connection whose answer ended after the bound with the next request begun on it', async () => {
    let finish: () => void = () => undefined;
    server.removeAllListeners('request');
    const drain = connectionDrain(server);
    // The answer's head goes out at once (keep-alive, before the drain); its end only when the test says.
    server.on('request', (_request: IncomingMessage, response: ServerResponse) => {
      response.writeHead(200, { 'content-length': '2' });
      response.write('{');
      finish = () => response.end('}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    client.on('error', () => undefined);
    client.resume();
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    client.write('GET /v1/balance HTTP/1.1\r\nHost: gateway\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const drained = within10s(drain.drain({ waitForClients: false, boundMs: 500 }));
    client.write('G');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    finish();
    expect(await drained).toBe('drained');
    await closed;
  });

  it('serves a direct client whose request was half written when the drain started and ends after the second of grace', async () => {
    const { drain, client } = await acceptedClient();
    let answer = '';
    client.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    const ended = new Promise<string>((resolve) => {
      client.once('close', () => resolve(answer.split('\r\n')[0]!));
      client.once('error', (error: NodeJS.ErrnoException) => resolve(`error ${error.code}`));
    });
    client.write('POST /v1/invoices HTTP/1.1\r\nHost: gateway\r\n');
    // Its first bytes are read before the drain begins.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const drained = drain.drain({ waitForClients: false });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    client.write('Content-Length: 2\r\n\r\n{}');
    expect(await ended).toBe('HTTP/1.1 200 OK');
    await drained;
  });
});
