import { Registry, WEBHOOK_EVENTS } from '#payments/merchants';

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
