/**
 * The baseline of the `http` bench section: a bare Fastify app with a `pg` Pool
 * (size 20, like the gateway's) and two routes doing one statement each:
 *
 *   POST /baseline      one INSERT INTO bench_baseline (201 with the row's id)
 *   GET  /baseline/:id  one SELECT … WHERE id = $1 (200, or 404)
 *
 * Run as a child process (`node dist/bench/baseline-server.js`) so that it does not
 * share an event loop with autocannon. Environment: DATABASE_URL (the table
 * bench_baseline must exist), PORT (0: a free port). Prints
 * `listening on http://127.0.0.1:<port>` once ready; stops on SIGTERM/SIGINT.
 */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import { Pool } from 'pg';

interface BaselineRow {
  id: string;
  order_id: string;
  body: unknown;
  created_at: Date;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const view = (row: BaselineRow) => ({
  id: row.id,
  orderId: row.order_id,
  body: row.body,
  createdAt: row.created_at.toISOString(),
});

async function main(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) throw new Error('DATABASE_URL is not set');
  const port = Number(process.env.PORT ?? '0');

  const pool = new Pool({ connectionString: databaseUrl, max: 20, application_name: 'gateway-bench-baseline' });
  pool.on('error', () => undefined);
  const app = Fastify({ logger: false, bodyLimit: 64 * 1024 });

  app.post('/baseline', async (request, reply) => {
    const body = request.body as { orderId?: unknown } | null;
    if (typeof body !== 'object' || body === null || typeof body.orderId !== 'string') {
      return reply.status(400).send({ error: 'orderId: a string is required' });
    }
    const result = await pool.query<BaselineRow>(
      `INSERT INTO bench_baseline (id, order_id, body, created_at) VALUES ($1, $2, $3, now())
       ON CONFLICT (order_id) DO NOTHING
       RETURNING id, order_id, body, created_at`,
      [randomUUID(), body.orderId, body],
    );
    if (result.rows.length === 0) return reply.status(409).send({ error: 'orderId already used' });
    return reply.status(201).send(view(result.rows[0]!));
  });

  app.get<{ Params: { id: string } }>('/baseline/:id', async (request, reply) => {
    if (!UUID.test(request.params.id)) return reply.status(404).send({ error: 'not found' });
    const result = await pool.query<BaselineRow>('SELECT id, order_id, body, created_at FROM bench_baseline WHERE id = $1', [request.params.id]);
    if (result.rows.length === 0) return reply.status(404).send({ error: 'not found' });
    return view(result.rows[0]!);
  });

  await app.listen({ port, host: '127.0.0.1' });
  const address = app.server.address();
  const actualPort = typeof address === 'object' && address ? address.port : port;
  process.stdout.write(`baseline listening on http://127.0.0.1:${actualPort}\n`);

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await app.close().catch(() => undefined);
    await pool.end().catch(() => undefined);
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

main().catch((error: unknown) => {
  process.stderr.write(`baseline server failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
