import type { CommandBus } from '@nestjs/cqrs';
import type { Reactor } from '#event-store/projections';
import { PAYMENTS_TO_LEDGER, paymentsToLedger } from './payments-to-ledger.reactor';
import { payoutOutcomes, refundOutcomes } from './refund-and-payout-outcomes.reactor';
import { PAYOUT_OUTCOMES, REFUND_OUTCOMES } from '../flows/outcomes';

export * from './payments-to-ledger.reactor';
export * from './refund-and-payout-outcomes.reactor';

/**
 * Every reactor the projector runs, sending its commands on `commands`. Their names key
 * their checkpoints and locks: a reactor renamed would start again from zero.
 */
export const allReactors = (commands: CommandBus): Reactor[] => [paymentsToLedger(commands), refundOutcomes(commands), payoutOutcomes(commands)];

/** Their names, in the same order. */
export const REACTOR_NAMES: readonly string[] = [PAYMENTS_TO_LEDGER, REFUND_OUTCOMES, PAYOUT_OUTCOMES];
