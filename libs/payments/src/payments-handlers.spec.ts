import 'reflect-metadata';
import type { Type } from '@nestjs/common';
import { COMMAND_HANDLER_METADATA, QUERY_HANDLER_METADATA } from '@nestjs/cqrs/dist/decorators/constants';
import type { Pool } from 'pg';
import type { EventStore } from '#event-store';
import type { GatewayServices } from './services';
import { GetBalanceAsOf } from './balance/get-balance-as-of.query';
import { GetBalance } from './balance/get-balance.query';
import { ChooseInvoiceMethod } from './invoices/choose-invoice-method.command';
import { CreateInvoice } from './invoices/create-invoice.command';
import { ExpireInvoice } from './invoices/expire-invoice.command';
import { GetInvoice } from './invoices/get-invoice.query';
import { ListInvoices } from './invoices/list-invoices.query';
import { RecordPaymentResult } from './invoices/record-payment-result.command';
import { GetLedgerEntries } from './ledger/get-ledger-entries.query';
import { RecordPayment } from './ledger/record-payment.command';
import { ReleaseHold } from './ledger/release-hold.command';
import { ReleaseReservation } from './ledger/release-reservation.command';
import { ReserveFunds } from './ledger/reserve-funds.command';
import { SettleReservation } from './ledger/settle-reservation.command';
import { COMMAND_HANDLERS, PaymentsModule, QUERY_HANDLERS } from './payments.module';
import { ApprovePayout } from './payouts/approve-payout.command';
import { CancelPayout } from './payouts/cancel-payout.command';
import { CreatePayout } from './payouts/create-payout.command';
import { ListPayouts } from './payouts/list-payouts.query';
import { PayPayout } from './payouts/pay-payout.command';
import { ProcessPayout } from './payouts/process-payout.command';
import { RejectPayout } from './payouts/reject-payout.command';
import { CompleteRefund } from './refunds/complete-refund.command';
import { FailRefund } from './refunds/fail-refund.command';
import { GetRefund } from './refunds/get-refund.query';
import { RefundInvoice } from './refunds/refund-invoice.command';

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
  const module = PaymentsModule.register({} as GatewayServices, {} as Pool, {} as EventStore);
  const provided = new Set(module.providers);

  it('registers exactly one handler for every command the issue names', () => {
    const byCommand = handledBy(COMMAND_HANDLERS, COMMAND_HANDLER_METADATA);
    for (const command of ISSUE_COMMANDS) {
      const handlers = byCommand.get(command) ?? [];
      expect({ command: command.name, handlers: handlers.map((h) => h.name) }).toEqual({ command: command.name, handlers: [`${command.name}Handler`] });
      expect(provided.has(handlers[0]!)).toBe(true);
    }
  });

  it('registers exactly one handler for every query the issue names', () => {
    const byQuery = handledBy(QUERY_HANDLERS, QUERY_HANDLER_METADATA);
    for (const query of ISSUE_QUERIES) {
      const handlers = byQuery.get(query) ?? [];
      expect({ query: query.name, handlers: handlers.map((h) => h.name) }).toEqual({ query: query.name, handlers: [`${query.name}Handler`] });
      expect(provided.has(handlers[0]!)).toBe(true);
    }
  });

  it('has no command or query with two handlers (the bus would keep only the last)', () => {
    for (const [message, handlers] of [...handledBy(COMMAND_HANDLERS, COMMAND_HANDLER_METADATA), ...handledBy(QUERY_HANDLERS, QUERY_HANDLER_METADATA)]) {
      expect({ message: message.name, handlers: handlers.length }).toEqual({ message: message.name, handlers: 1 });
    }
  });
});
