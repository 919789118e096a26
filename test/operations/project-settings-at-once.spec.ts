/**
 * PATCH /admin/v1/projects/{id} changes the fields sent: several PATCHes of one project
 * at once, each of other fields, all land (each read and written under the project's
 * row lock), with real concurrent requests to a gateway as `npm start` runs it.
 */
import { expectStatus, InvoiceGateway, Merchant, startInvoiceGateway } from '../support/merchant-fixtures';

describe('PATCHes of one project at once', () => {
  let gw: InvoiceGateway;
  let shop: Merchant;

  beforeAll(async () => {
    gw = await startInvoiceGateway();
    shop = await gw.operator.merchant({ holdHours: 24 });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('eight PATCHes of different fields sent together: every change is kept, none undone by another', async () => {
    for (let round = 1; round <= 5; round++) {
      const changes: Record<string, unknown>[] = [
        { name: `Магазин ${round}` },
        { holdHours: round },
        { customerFeeShare: 10 * round },
        { usdtEnabled: round % 2 === 1 },
        { webhookEvents: round % 2 === 1 ? ['invoice.paid'] : ['invoice.paid', 'invoice.failed'] },
        { methods: { sbp: { feePct: `${round}.50` } } },
        { methods: { card: { feePct: `${round}.25` } } },
        { methods: { crypto: { feePct: `${round}.75` } } },
      ];
      const replies = await Promise.all(changes.map((change) => gw.operator.http.patch(`/admin/v1/projects/${shop.projectId}`, change)));
      for (const reply of replies) expectStatus(reply, 200);
      const project = (await gw.operator.http.get(`/admin/v1/projects/${shop.projectId}`)).body;
      expect({
        round,
        name: project.name,
        holdHours: project.holdHours,
        customerFeeShare: project.customerFeeShare,
        usdtEnabled: project.usdtEnabled,
        webhookEvents: project.webhookEvents,
        sbpFee: project.methods.sbp.feePct,
        cardFee: project.methods.card.feePct,
        cryptoFee: project.methods.crypto.feePct,
      }).toEqual({
        round,
        name: `Магазин ${round}`,
        holdHours: round,
        customerFeeShare: 10 * round,
        usdtEnabled: round % 2 === 1,
        webhookEvents: round % 2 === 1 ? ['invoice.paid'] : ['invoice.paid', 'invoice.failed'],
        sbpFee: `${round}.50`,
        cardFee: `${round}.25`,
        cryptoFee: `${round}.75`,
      });
    }
  });
});
