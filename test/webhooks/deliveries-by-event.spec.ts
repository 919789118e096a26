/**
 * The operator finds the deliveries of one event (`GET /admin/v1/webhook-deliveries
 * ?eventId=`, the runbook of a failing receiver) by the event's id, not by walking every
 * newer delivery of the gateway: measured as rows read by the list's own statement,
 * never as a time.
 */
import { listWebhookDeliveries } from '#payments/webhooks';
import { measuringPool } from '../support/rows-read';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const DELIVERIES = 20_000; // one a minute from 2025-01-01, over 20 projects
const uuid = (prefix: string, n: string) => `('${prefix}' || lpad(${n}::text, 12, '0'))::uuid`;
const OLDEST_EVENT = '00000000-0000-4000-8000-000000000001';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(
    `INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, attempts_made, created_at)
     SELECT ${uuid('10000000-0000-4000-8000-', 'n')}, ${uuid('00000000-0000-4000-8000-', 'n')}, 'invoice.paid',
            ${uuid('20000000-0000-4000-8000-', '(n % 20)')}, 'https://shop.example/webhooks', '{}', false, 'delivered', 1,
            '2025-01-01T00:00:00Z'::timestamptz + n * interval '1 minute'
     FROM generate_series(1, ${DELIVERIES}) AS n`,
  );
  await db.pool.query('ANALYZE webhook_deliveries');
});
afterAll(async () => {
  await db?.drop();
});

it('the deliveries of the oldest event are found by its id, without reading the newer ones', async () => {
  const measured = measuringPool(db.pool, 'webhook_deliveries');
  const page = await listWebhookDeliveries(measured.pool, { eventId: OLDEST_EVENT, before: null, limit: 50 });
  expect(page.items.map((d) => d.event_id)).toEqual([OLDEST_EVENT]);
  expect(page.hasMore).toBe(false);
  expect(measured.rowsRead()).toBeLessThanOrEqual(10);
});
