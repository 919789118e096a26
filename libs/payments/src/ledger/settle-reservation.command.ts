import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { LedgerId } from '#ledger';
import type { Kopecks } from '#ledger';
import { LedgerBook, Posted } from '.';

/** A reservation's money leaves for good (refund succeeded, payout paid); LedgerError reservation_not_found once closed. */
export class SettleReservation extends Command<Posted> {
  constructor(
    readonly ledger: LedgerId,
    readonly reservationId: string,
    readonly at: string,
    /** Payouts: the fee the gateway keeps out of the reserved amount. */
    readonly feeAmount?: Kopecks,
  ) {
    super();
  }
}

@CommandHandler(SettleReservation)
export class SettleReservationHandler implements ICommandHandler<SettleReservation> {
  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  execute(command: SettleReservation): Promise<Posted> {
    return this.ledgers.post(command.ledger, {
      type: 'SettleReservation',
      reservationId: command.reservationId,
      at: command.at,
      ...(command.feeAmount === undefined ? {} : { feeAmount: command.feeAmount }),
    });
  }
}
