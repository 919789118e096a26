import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { LedgerId } from '#ledger';
import { LedgerBook, Posted } from '.';

/** A payment's hold whose time has come moves from pending to available (LedgerError hold_not_found once released); sent by the hold-release worker. */
export class ReleaseHold extends Command<Posted> {
  constructor(
    readonly ledger: LedgerId,
    readonly invoiceId: string,
    readonly at: string,
  ) {
    super();
  }
}

@CommandHandler(ReleaseHold)
export class ReleaseHoldHandler implements ICommandHandler<ReleaseHold> {
  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  execute(command: ReleaseHold): Promise<Posted> {
    return this.ledgers.post(command.ledger, { type: 'ReleaseHold', invoiceId: command.invoiceId, at: command.at });
  }
}
