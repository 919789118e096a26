import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutFlow } from '#payments/payouts';

/** The operator approves a pending payout (409 conflict when illegal from its status). */
export class ApprovePayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
  ) {
    super();
  }
}

/** The operator starts processing an approved payout. */
export class ProcessPayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
  ) {
    super();
  }
}

/** The payout was paid (the bank's id, if any): its reservation settles, the net amount out and the fee to fees. */
export class PayPayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
    readonly externalId: string | null,
  ) {
    super();
  }
}

/** The operator rejects the payout: its reservation goes back to available. */
export class RejectPayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
    readonly reason: string,
  ) {
    super();
  }
}

/** The operator cancels a pending payout: its reservation goes back to available. */
export class CancelPayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
    readonly reason: string,
  ) {
    super();
  }
}

@CommandHandler(ApprovePayout)
export class ApprovePayoutHandler implements ICommandHandler<ApprovePayout> {
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}
  execute({ payoutId, now }: ApprovePayout): Promise<Payout> {
    return this.flow.transition(payoutId, { type: 'ApprovePayout', at: now.toISOString() });
  }
}

@CommandHandler(ProcessPayout)
export class ProcessPayoutHandler implements ICommandHandler<ProcessPayout> {
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}
  execute({ payoutId, now }: ProcessPayout): Promise<Payout> {
    return this.flow.transition(payoutId, { type: 'StartProcessing', at: now.toISOString() });
  }
}

@CommandHandler(PayPayout)
export class PayPayoutHandler implements ICommandHandler<PayPayout> {
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}
  execute({ payoutId, now, externalId }: PayPayout): Promise<Payout> {
    return this.flow.transition(payoutId, { type: 'PayPayout', at: now.toISOString(), externalId });
  }
}

@CommandHandler(RejectPayout)
export class RejectPayoutHandler implements ICommandHandler<RejectPayout> {
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}
  execute({ payoutId, now, reason }: RejectPayout): Promise<Payout> {
    return this.flow.transition(payoutId, { type: 'RejectPayout', at: now.toISOString(), reason });
  }
}

@CommandHandler(CancelPayout)
export class CancelPayoutHandler implements ICommandHandler<CancelPayout> {
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}
  execute({ payoutId, now, reason }: CancelPayout): Promise<Payout> {
    return this.flow.transition(payoutId, { type: 'CancelPayout', at: now.toISOString(), reason });
  }
}
