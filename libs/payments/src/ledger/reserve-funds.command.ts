import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { LedgerId } from '#ledger';
import { LedgerBook, LedgerRequest } from '.';

/** Reserves a refund's or payout's amount from available, or records why not, once per reservation id (the first decision stands for every retry). */
export class ReserveFunds extends Command<Awaited<ReturnType<LedgerBook['reserve']>>> {
  constructor(
    readonly ledger: LedgerId,
    readonly request: Omit<Extract<LedgerRequest, { type: 'ReserveFunds' }>, 'recordRefusal' | 'type'>,
  ) {
    super();
  }
}

@CommandHandler(ReserveFunds)
export class ReserveFundsHandler implements ICommandHandler<ReserveFunds> {
  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  execute(command: ReserveFunds): Promise<Awaited<ReturnType<LedgerBook['reserve']>>> {
    return this.ledgers.reserve(command.ledger, { ...command.request, type: 'ReserveFunds' });
  }
}
