import type { Pool } from 'pg';
import { projectWebhookSettingsMigration, Registry, WEBHOOK_EVENTS } from '#payments/merchants';

type CreatedProject = Awaited<ReturnType<Registry['createProject']>>['project'];

/**
 * A merchant account with one active project subscribed to every webhook event (no hold,
 * the customer pays the fee), made through the Registry: the set-up of the webhook tests.
 */
export async function webhookProject(registry: Registry, now: Date, webhookUrl = 'https://shop.example/hooks'): Promise<CreatedProject> {
  const account = await registry.createAccount('Магазин', 'shop@example.com', now);
  const { project } = await registry.createProject(
    account.id,
    {
      name: 'Магазин',
      status: 'active',
      webhookUrl,
      webhookEvents: [...WEBHOOK_EVENTS],
      usdtEnabled: false,
      holdHours: 0,
      methodOverrides: {},
      customerFeeShare: 100,
    },
    now,
  );
  return project;
}

/**
 * Runs `write` (projects made through today's Registry) on a database migrated only up to
 * an older migration: the Registry also writes project_webhook_settings
 * (payments:0046), which is made for the call and dropped after it, so that the upgrade
 * under test then creates and fills it from `projects` as on a deployed database.
 */
export async function onOlderSchema<T>(pool: Pick<Pool, 'query'>, write: () => Promise<T>): Promise<T> {
  await pool.query(projectWebhookSettingsMigration.sql);
  try {
    return await write();
  } finally {
    await pool.query('DROP TABLE project_webhook_settings');
  }
}
