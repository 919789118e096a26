/**
 * The README's "A first request" run as a newcomer runs it: the gateway started as the
 * README says (the embedded server, the operator token it generates and prints), its
 * ```sh blocks read from README.md (so doc and test cannot drift), each run by bash with
 * the values `npm start` printed in place of the placeholders: a webhook receiver and the sandbox project
 * pointed at it, an invoice, its payment through the operator API, a refund, and the
 * receiver printing invoice.paid and refund.succeeded, all within the test's minute
 * (issue 37: the sandbox held payments 24 h, so the first refund was refused).
 */
import { spawn, ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { ROOT, RunningGateway, startGateway, temporaryDataDir } from '../support/gateway-process';
import { Json } from '../support/merchant-fixtures';
import { fill } from '../support/runbooks';

/** The ```sh blocks of the README's section "A first request". */
function firstRequestBlocks(): string[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = /^## A first request\n([\s\S]*?)^## /m.exec(readme)![1]!;
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((m) => m[1]!);
}

/** The JSON answers printed one after another (curl -s adds no newline). */
function jsonValues(text: string): Json[] {
  const values: Json[] = [];
  let depth = 0;
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quoted) {
      if (c === '\\') i += 1;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === '{' && depth++ === 0) start = i;
    else if (c === '}' && --depth === 0) values.push(JSON.parse(text.slice(start, i + 1)));
  }
  return values;
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

/** bash -c on one block, in a process group of its own (the receiver it starts in the background belongs to it). */
function bash(script: string): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn('bash', ['-e', '-c', script], { cwd: ROOT, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let text = '';
  child.stdout!.on('data', (c: Buffer) => (text += c.toString('utf8')));
  child.stderr!.on('data', (c: Buffer) => (text += c.toString('utf8')));
  return { child, output: () => text, exited: new Promise((resolve) => child.on('exit', resolve)) };
}

describe("the README's first request", () => {
  let gw: RunningGateway;
  const data = temporaryDataDir();
  let receiverGroup: ChildProcess | null = null;
  beforeAll(async () => {
    // As the README starts it: `WEBHOOK_ALLOW_PRIVATE_NETWORKS=true npm start`, the embedded server and a generated
    // operator token, taken from what it printed; DATA_DIR: a fresh folder of the test's own instead of ./data.
    gw = await startGateway('gateway', { DATA_DIR: data.dir, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  });
  afterAll(async () => {
    if (receiverGroup?.pid) process.kill(-receiverGroup.pid, 'SIGTERM');
    await gw?.kill();
    data.remove();
  });

  it('creates, pays and refunds an invoice of the printed sandbox project, and its receiver gets the webhooks', async () => {
    const printed = gw.output();
    const [, project] = /created a sandbox project (\S+)/.exec(printed)!;
    const [, key] = /test secret key: (sk_test_\S+)/.exec(printed)!;
    const port = await freePort();
    const values = {
      'KEY=sk_test_…': `KEY=${key}`,
      'ADMIN=…': `ADMIN=${gw.adminToken}`,
      'PROJECT=…': `PROJECT=${project}`,
      'http://127.0.0.1:3000': gw.baseUrl,
      '4000': String(port),
    };
    const blocks = firstRequestBlocks();
    expect(blocks).toHaveLength(3);
    const [setup, create, payAndRefund] = blocks as [string, string, string];
    const variables = fill(setup, values)
      .split('\n')
      .filter((l) => /^[A-Z]+=/.test(l))
      .join('\n');

    // The receiver keeps running in the background of the first block, printing to its output.
    const receiver = bash(fill(setup, values));
    receiverGroup = receiver.child;
    expect(await receiver.exited).toBe(0);
    expect(jsonValues(receiver.output())).toEqual([expect.objectContaining({ id: project, webhookUrl: `http://127.0.0.1:${port}/`, holdHours: 0 })]);

    const created = bash(`${variables}\n${fill(create, { 'http://127.0.0.1:3000': gw.baseUrl })}`);
    expect(await created.exited).toBe(0);
    const [invoice] = jsonValues(created.output());
    expect(invoice).toMatchObject({ status: 'created', amount: '1500.00' });

    const paid = bash(`${variables}\n${fill(payAndRefund, { 'ID=…': `ID=${invoice.id}`, 'http://127.0.0.1:3000': gw.baseUrl })}`);
    expect(await paid.exited).toBe(0);
    const [got, payment, refund] = jsonValues(paid.output());
    expect({ got: got.status, paid: payment.status, refund: refund.status, amount: refund.amount }).toEqual({
      got: 'created',
      paid: 'paid',
      refund: 'pending',
      amount: '500.00',
    });

    // The receiver prints invoice.paid, then refund.succeeded once the sandbox processed the refund.
    await new Promise<void>((resolve) => {
      const check = () => jsonValues(receiver.output()).some((e) => e.type === 'refund.succeeded') && resolve();
      receiver.child.stdout!.on('data', check);
      check();
    });
    const events = jsonValues(receiver.output()).slice(1);
    expect(events.map((e) => e.type)).toEqual(['invoice.paid', 'refund.succeeded']);
  });

  it("docs/security.md's sandbox on a laptop: the same start, and its PATCH points the project's webhooks at a local receiver", async () => {
    const security = readFileSync(path.join(ROOT, 'docs/security.md'), 'utf8');
    const section = /^### A sandbox on a laptop\n([\s\S]*?)^#/m.exec(security)![1]!;
    const [start, ...patch] = /^```sh\n([\s\S]*?)^```/m.exec(section)![1]!.trimEnd().split('\n');
    // The gateway of this file was started so.
    expect(start).toBe('WEBHOOK_ALLOW_PRIVATE_NETWORKS=true npm start');
    const [, project] = /created a sandbox project (\S+)/.exec(gw.output())!;
    const run = bash(fill(patch.join('\n'), { 'http://127.0.0.1:3000': gw.baseUrl, '<project id>': project!, '<operator token>': gw.adminToken }));
    expect(await run.exited).toBe(0);
    expect(jsonValues(run.output())).toEqual([expect.objectContaining({ id: project, webhookUrl: 'http://127.0.0.1:8080/hooks' })]);
  });
});
