import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { LedgerId } from '#ledger';
import type { Kopecks } from '#ledger';
import { LedgerBook, Posted } from '.';

/** A paid invoice in the merchant's ledger: net to pending (until releaseAt) or available, the fee to fees. Once per invoice (cause payment:<invoiceId>); sent by the payments_to_ledger process manager. */
export class RecordPayment extends Command<Posted> {
  constructor(
    readonly ledger: LedgerId,
    readonly invoiceId: string,
    /** What the merchant is credited: amount − the merchant's part of the fee. */
    readonly netAmount: Kopecks,
    readonly feeAmount: Kopecks,
    /** When the net amount becomes available; null: no hold. */
    readonly releaseAt: string | null,
    readonly at: string,
  ) {
    super();
  }
}

@CommandHandler(RecordPayment)
export class RecordPaymentHandler implements ICommandHandler<RecordPayment> {
  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  execute(command: RecordPayment): Promise<Posted> {
    return this.ledgers.post(command.ledger, {
      type: 'RecordPayment',
      invoiceId: command.invoiceId,
      netAmount: command.netAmount,
      feeAmount: command.feeAmount,
      releaseAt: command.releaseAt,
      at: command.at,
    });
  }
}
