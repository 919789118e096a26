import 'reflect-metadata';
import type { Type } from '@nestjs/common';
import { COMMAND_HANDLER_METADATA, QUERY_HANDLER_METADATA } from '@nestjs/cqrs/dist/decorators/constants';
import type { Pool } from 'pg';
import type { EventStore } from '#event-store';
import type { GatewayServices } from '#payments/services';
import { COMMAND_HANDLERS, PaymentsModule, QUERY_HANDLERS } from '#payments';
import { GetBalance, GetBalanceAsOf } from '#payments/balance';
import { ExpireInvoice } from '#payments/invoices';
import { GetLedgerEntries, RecordPayment, ReleaseHold, ReleaseReservation, ReserveFunds, SettleReservation } from '#payments/ledger';
import { CreatePayout } from '../../apps/api/src/payouts/create-payout/create-payout.handler';
import { ListPayouts } from '../../apps/api/src/payouts/list-payouts/list-payouts.handler';
import { ApprovePayout, CancelPayout, PayPayout, ProcessPayout, RejectPayout } from '../../apps/api/src/payouts/transition-payout/transition-payout.handler';
import { CompleteRefund } from '#payments/refunds';
import { RefundInvoice } from '../../apps/api/src/refunds/refund-invoice/refund-invoice.handler';
import { GetRefund } from '../../apps/api/src/refunds/get-refund/get-refund.handler';
import { FailRefund } from '../../apps/api/src/refunds/fail-refund/fail-refund.handler';
import { ChooseInvoiceMethod } from '../../apps/api/src/pay/choose-invoice-method.handler';
import { CreateInvoice } from '../../apps/api/src/invoices/create-invoice/create-invoice.handler';
import { API_HANDLERS } from '../../apps/api/src/app.module';
import { GetInvoice } from '../../apps/api/src/invoices/get-invoice/get-invoice.handler';
import { ListInvoices } from '../../apps/api/src/invoices/list-invoices/list-invoices.handler';
import { RecordPaymentResult } from '../../apps/api/src/invoices/record-payment-result/record-payment-result.handler';

/** The commands the issue names ("Commands and queries"), the ledger's among them. */
const ISSUE_COMMANDS: readonly Type[] = [
  CreateInvoice,
  ChooseInvoiceMethod,
  RecordPaymentResult,
  ExpireInvoice,
  RefundInvoice,
  FailRefund,
  CompleteRefund,
  CreatePayout,
  ApprovePayout,
  ProcessPayout,
  PayPayout,
  RejectPayout,
  CancelPayout,
  ReleaseHold,
  RecordPayment,
  ReserveFunds,
  SettleReservation,
  ReleaseReservation,
];

/** The queries the issue names. */
const ISSUE_QUERIES: readonly Type[] = [GetInvoice, ListInvoices, GetRefund, GetBalance, ListPayouts, GetLedgerEntries, GetBalanceAsOf];

/** The handlers PaymentsModule registers, by the message class their decorator names (Nest's metadata). */
function handledBy(handlers: readonly Type[], metadataKey: string): Map<Type, Type[]> {
  const byMessage = new Map<Type, Type[]>();
  for (const handler of handlers) {
    const message = Reflect.getMetadata(metadataKey, handler) as Type | undefined;
    if (!message) throw new Error(`${handler.name} has no ${metadataKey} metadata`);
    byMessage.set(message, [...(byMessage.get(message) ?? []), handler]);
  }
  return byMessage;
}

describe('PaymentsModule: commands and queries on the buses', () => {
  const module = PaymentsModule.register({} as GatewayServices, {} as Pool, {} as EventStore, API_HANDLERS);
  // The handlers of both processes: the payments module's and those of the API's use-case folders.
  const all: readonly Type[] = [...COMMAND_HANDLERS, ...QUERY_HANDLERS, ...API_HANDLERS];
  const byCommand = handledBy(
    all.filter((h) => Reflect.hasMetadata(COMMAND_HANDLER_METADATA, h)),
    COMMAND_HANDLER_METADATA,
  );
  const byQuery = handledBy(
    all.filter((h) => Reflect.hasMetadata(QUERY_HANDLER_METADATA, h)),
    QUERY_HANDLER_METADATA,
  );
  const provided = new Set(module.providers);

  it('registers exactly one handler for every command the issue names', () => {
    for (const command of ISSUE_COMMANDS) {
      const handlers = byCommand.get(command) ?? [];
      expect({ command: command.name, handlers: handlers.map((h) => h.name) }).toEqual({ command: command.name, handlers: [`${command.name}Handler`] });
      expect(provided.has(handlers[0]!)).toBe(true);
    }
  });

  it('registers exactly one handler for every query the issue names', () => {
    for (const query of ISSUE_QUERIES) {
      const handlers = byQuery.get(query) ?? [];
      expect({ query: query.name, handlers: handlers.map((h) => h.name) }).toEqual({ query: query.name, handlers: [`${query.name}Handler`] });
      expect(provided.has(handlers[0]!)).toBe(true);
    }
  });

  it('has no command or query with two handlers (the bus would keep only the last)', () => {
    for (const [message, handlers] of [...byCommand, ...byQuery]) {
      expect({ message: message.name, handlers: handlers.length }).toEqual({ message: message.name, handlers: 1 });
    }
  });
});
