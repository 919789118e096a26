/**
 * The payment page's answer to a write whose outcome is unknown (the marked 503 of the
 * API, MAYBE_WRITTEN_MARK): the buyer's choice or payment may be recorded, so the page
 * says so and sends the buyer back to the invoice to look before clicking again. It
 * rendered the generic "try again in a minute" page, as for a 503 that wrote nothing.
 */
import type { ArgumentsHost } from '@nestjs/common';
import { AppendOutcomeUnknownError } from '#event-store';
import { PaymentPageErrorFilter } from '../../apps/api/src/pay/payment-page.controller';

/** The page the filter sends for `exception` on POST /pay/{id}/method: status, Retry-After and HTML. */
function pageFor(exception: unknown): { status: number; headers: Record<string, string>; html: string } {
  const sent = { status: 0, headers: {} as Record<string, string>, html: '' };
  const reply = {
    status: (s: number) => ((sent.status = s), reply),
    header: (name: string, value: string) => ((sent.headers[name.toLowerCase()] = value), reply),
    headers: (all: Record<string, string>) => (Object.assign(sent.headers, all), reply),
    send: (html: string) => ((sent.html = html), reply),
  };
  const id = '6f1c2d6e-2f7a-4c43-9d1e-0b2a7a0c5e11';
  const request = { method: 'POST', url: `/pay/${id}/method`, params: { id }, raw: {}, is404: false, log: { error: () => undefined } };
  const host = { switchToHttp: () => ({ getResponse: () => reply, getRequest: () => request }) } as unknown as ArgumentsHost;
  new PaymentPageErrorFilter().catch(exception, host);
  return sent;
}

it('an append whose outcome is unknown: a 503 page saying the action may be recorded, with the link back to the invoice', () => {
  const page = pageFor(new AppendOutcomeUnknownError('invoice-1', { cause: new Error('connection terminated') }));
  expect(page.status).toBe(503);
  expect(page.headers['retry-after']).toBe('1');
  expect(page.html).toContain('действие могло быть записано');
  expect(page.html).toContain('href="/pay/6f1c2d6e-2f7a-4c43-9d1e-0b2a7a0c5e11"');
});

it('a 503 that wrote nothing keeps the plain page', () => {
  const page = pageFor(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
  expect(page.status).toBe(503);
  expect(page.html).toContain('Сервис временно не смог обработать запрос');
  expect(page.html).not.toContain('могло быть записано');
});
