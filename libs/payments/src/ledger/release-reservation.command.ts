import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { LedgerId } from '#ledger';
import { LedgerBook, Posted } from '.';

/** A reservation's money returns to available (refund failed, payout rejected or cancelled); LedgerError reservation_not_found once closed. */
export class ReleaseReservation extends Command<Posted> {
  constructor(
    readonly ledger: LedgerId,
    readonly reservationId: string,
    readonly at: string,
  ) {
    super();
  }
}

@CommandHandler(ReleaseReservation)
export class ReleaseReservationHandler implements ICommandHandler<ReleaseReservation> {
  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  execute(command: ReleaseReservation): Promise<Posted> {
    return this.ledgers.post(command.ledger, { type: 'ReleaseReservation', reservationId: command.reservationId, at: command.at });
  }
}
