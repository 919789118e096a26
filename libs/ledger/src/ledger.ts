/**
 * The double-entry ledger of one merchant account in one mode (test or live).
 *
 * Pure: no I/O, no clock, no NestJS. `decide` says which journal entries a command
 * posts (or why it may not), `evolve` folds posted entries into the state. Every
 * entry balances (its postings sum to zero), no merchant account goes below zero,
 * and therefore the sum of all accounts is always zero.
 *
 * Sign convention: a merchant account's balance is what the gateway owes the
 * merchant (positive); system accounts carry the other side. Flows:
 *   payment recorded   clearing −(net + fee)   pending +net   fees +fee
 *   hold released      pending −net            available +net
 *   funds reserved     available −amount       reserved +amount
 *   refund settled     reserved −amount        refunds_paid +amount
 *   payout settled     reserved −amount        payouts_sent +(amount − fee)   fees +fee
 *   reservation released  reserved −amount     available +amount
 *   reservation refused   (no postings: the refusal of a request, recorded so that
 *                          a retry of the same request gets the same answer)
 */
import { Refusal } from './refusal';
import { Kopecks, MAX_MONEY_KOPECKS } from './money';
import { ledgerEntryId, LedgerId } from './ledger-id';
import { OpenHold, OpenHolds } from './open-holds';

export type { OpenHold };

/** The two ledgers of an account: test keys move the first, live keys the second. */
export const LEDGER_MODES = ['test', 'live'] as const;
export type LedgerMode = (typeof LEDGER_MODES)[number];

export const MERCHANT_ACCOUNTS = ['pending', 'available', 'reserved'] as const;
export const SYSTEM_ACCOUNTS = ['acquiring_clearing', 'fees', 'refunds_paid', 'payouts_sent'] as const;
export const LEDGER_ACCOUNTS = [...MERCHANT_ACCOUNTS, ...SYSTEM_ACCOUNTS] as const;
export type MerchantAccount = (typeof MERCHANT_ACCOUNTS)[number];
export type LedgerAccount = (typeof LEDGER_ACCOUNTS)[number];

export type Balances = Readonly<Record<LedgerAccount, Kopecks>>;

export interface Posting {
  readonly account: LedgerAccount;
  readonly amount: Kopecks;
}

export type ReservationPurpose = 'refund' | 'payout';

export type EntryKind = 'payment_recorded' | 'hold_released' | 'funds_reserved' | 'reservation_refused' | 'reservation_settled' | 'reservation_released';

/** Why a reservation was refused. */
export type ReservationRefusal = 'insufficient_balance' | 'too_many_pending' | 'duplicate_request';

/** The payout rules a reservation for a payout is decided under (spec: Limits). */
export interface PayoutReservationRules {
  /** Amount and payout detail: a repeat of both within the window is a duplicate. */
  readonly fingerprint: string;
  /** null: not checked (the request carries an orderId, its own idempotency key). */
  readonly duplicateWindowSeconds: number | null;
  /** Unfinished payouts (open payout reservations) allowed at once. */
  readonly maxUnfinished: number;
}

/** One journal entry: the only event of the ledger stream. */
export interface LedgerEntryPostedData {
  readonly [key: string]: unknown;
  readonly entryId: string;
  readonly kind: EntryKind;
  /** What caused it, e.g. `payment:<invoiceId>`: the same cause never posts twice. */
  readonly cause: string;
  readonly postings: readonly Posting[];
  readonly occurredAt: string;
  /** payment_recorded: the net amount now held in `pending`, and until when. */
  readonly hold?: { readonly invoiceId: string; readonly amount: Kopecks; readonly releaseAt: string | null };
  /** hold_released: whose hold. */
  readonly invoiceId?: string;
  /** funds_reserved / reservation_refused / reservation_settled / reservation_released. */
  readonly reservation?: { readonly id: string; readonly purpose: ReservationPurpose; readonly amount: Kopecks };
  /** reservation_refused: why. */
  readonly refusal?: ReservationRefusal;
  /** funds_reserved for a payout: its fingerprint, for the duplicate window. */
  readonly payoutFingerprint?: string;
  /** funds_reserved for a payout reserved after a later entry: when it was requested (the window's start). */
  readonly payoutRequestedAt?: string;
}

export type LedgerEvent = { readonly type: 'LedgerEntryPosted'; readonly data: LedgerEntryPostedData };

export interface OpenReservation {
  readonly purpose: ReservationPurpose;
  readonly amount: Kopecks;
}
/** A payout reserved recently: when it was requested, and when reserved if later (by recovery). */
export interface RecentPayout {
  readonly fingerprint: string;
  readonly at: string;
  readonly reservedAt?: string;
}
/**
 * How long a payout is remembered after it was reserved, by the ledger's latest time: the
 * one-minute duplicate window plus the time recovery may take to reserve its repeat late.
 */
export const RECENT_PAYOUT_WINDOW_MS = 5 * 60_000;

/**
 * Everything a decision needs, and nothing that grows with history: balances, the
 * holds and reservations still open, and a bounded window of recent causes. Whether
 * a cause older than the window posted is the log's answer, given with the command
 * (`postedBeforeWindow`, see `needsCauseLookup`).
 */
export interface LedgerState {
  readonly balances: Balances;
  /** The open holds: immutable, each entry costs O(log n) in them (as JSON, the record by invoice id). */
  readonly holds: OpenHolds;
  readonly reservations: Readonly<Record<string, OpenReservation>>;
  /**
   * The most recent causes (at least RECENT_CAUSES_KEPT of them), oldest first, in
   * chunks of CAUSE_CHUNK so that remembering one copies a small chunk, not the window.
   */
  readonly recentCauses: readonly (readonly string[])[];
  readonly recentPayouts: readonly RecentPayout[];
  readonly entries: number;
  /**
   * The latest `occurredAt` of the ledger's entries (ISO 8601), null before the first:
   * entries are not in time order in the log (a payment is dated when it was paid, and
   * may be posted after a release), and a reservation is never dated before an entry
   * whose money it may take.
   */
  readonly latestAt: string | null;
}

/** The later of an entry's time and the ledger's latest (as instants; ISO texts may differ in form). */
export const laterOf = (at: string, latest: string | null): string => (latest !== null && Date.parse(latest) > Date.parse(at) ? latest : at);

export const RECENT_CAUSES_KEPT = 2000;
const CAUSE_CHUNK = 64;

export const hasRecentCause = (state: LedgerState, cause: string): boolean => state.recentCauses.some((chunk) => chunk.includes(cause));

/** How many causes the window holds (at least RECENT_CAUSES_KEPT once the ledger is that long). */
export const rememberedCauses = (state: LedgerState): number => state.recentCauses.reduce((n, chunk) => n + chunk.length, 0);

/**
 * The entries older than the window of recent causes: revisions 0 to this number − 1
 * of the ledger's stream. 0 while the window still holds the whole ledger.
 */
export const entriesBeforeWindow = (state: LedgerState): number => state.entries - rememberedCauses(state);

/**
 * The first entry (counted from 0) that the window of recent causes holds in a ledger
 * of `entries` entries: the chunks start at multiples of CAUSE_CHUNK, and the oldest is
 * dropped once the others hold RECENT_CAUSES_KEPT.
 */
export const recentCausesFrom = (entries: number): number =>
  entries < RECENT_CAUSES_KEPT ? 0 : CAUSE_CHUNK * Math.floor((entries - RECENT_CAUSES_KEPT) / CAUSE_CHUNK);

/**
 * The window of recent causes of a ledger from the causes of its entries
 * recentCausesFrom(entries) to its last, in order: what remembering every cause from
 * the first entry on gives (an audit takes the window from the log itself, decision
 * 0123).
 */
export function recentCausesOf(causes: readonly string[]): LedgerState['recentCauses'] {
  let window: LedgerState['recentCauses'] = [];
  for (const cause of causes) window = rememberCause(window, cause);
  return window;
}

function rememberCause(chunks: LedgerState['recentCauses'], cause: string): LedgerState['recentCauses'] {
  const last = chunks[chunks.length - 1];
  const appended = last && last.length < CAUSE_CHUNK ? [...chunks.slice(0, -1), [...last, cause]] : [...chunks, [cause]];
  // Drop the oldest chunk once the others still hold the whole window.
  const total = appended.reduce((n, c) => n + c.length, 0);
  return total - appended[0]!.length >= RECENT_CAUSES_KEPT ? appended.slice(1) : appended;
}

const zeroBalances = (): Balances => Object.fromEntries(LEDGER_ACCOUNTS.map((a) => [a, 0])) as unknown as Balances;

export const initialLedgerState = (): LedgerState => ({
  balances: zeroBalances(),
  holds: OpenHolds.empty(),
  reservations: {},
  recentCauses: [],
  recentPayouts: [],
  entries: 0,
  latestAt: null,
});

// ---------------------------------------------------------------------------------
// Commands

interface CommandBase {
  /** Id of the journal entry to post (derived from the cause by the caller). */
  readonly entryId: string;
  /** The gateway clock's time of the decision, ISO 8601. */
  readonly at: string;
  /**
   * Whether an entry older than the state's window of recent causes posted this
   * command's cause: the log's answer, looked up exactly by the caller (LedgerBook)
   * when `needsCauseLookup(command, state)` says the state cannot tell. Without it
   * such a command cannot be decided (decide throws CauseHistoryMissingError).
   */
  readonly postedBeforeWindow?: boolean;
}

export type LedgerCommand =
  | (CommandBase & {
      readonly type: 'RecordPayment';
      readonly invoiceId: string;
      /** What the merchant is credited: amount − merchant's part of the fee. */
      readonly netAmount: Kopecks;
      /** The whole fee of the service. */
      readonly feeAmount: Kopecks;
      /** When the net amount becomes available; null: no hold. */
      readonly releaseAt: string | null;
    })
  | (CommandBase & { readonly type: 'ReleaseHold'; readonly invoiceId: string })
  | (CommandBase & {
      /**
       * Releases the holds due by `at`, the earliest first, until `available` covers
       * `amount` (holdsToRelease): one entry per hold, each of its own cause and id
       * (derived from `ledger`), all posted together. Its own `entryId` is not used.
       */
      readonly type: 'ReleaseDueHolds';
      readonly ledger: LedgerId;
      readonly amount: Kopecks;
    })
  | (CommandBase & {
      readonly type: 'ReserveFunds';
      readonly reservationId: string;
      readonly purpose: ReservationPurpose;
      readonly amount: Kopecks;
      /** Payouts: the limits on unfinished and duplicate payouts. */
      readonly payout?: PayoutReservationRules;
      /**
       * Record a refusal as an entry without postings instead of answering an error:
       * the request's first decision then stands for every retry, whoever makes it.
       */
      readonly recordRefusal?: boolean;
    })
  | (CommandBase & {
      readonly type: 'SettleReservation';
      readonly reservationId: string;
      /** Payouts: the payout fee kept by the gateway out of the reserved amount. */
      readonly feeAmount?: Kopecks;
    })
  | (CommandBase & { readonly type: 'ReleaseReservation'; readonly reservationId: string });

export type LedgerErrorCode =
  | 'insufficient_balance'
  | 'invalid_amount'
  | 'hold_not_found'
  | 'hold_not_due'
  | 'reservation_not_found'
  | 'too_many_pending'
  | 'duplicate_request'
  | 'invalid_time';

export type LedgerError = Refusal<LedgerErrorCode>;

/** The cause key of a command: one posting per cause, ever. */
export function causeOf(command: LedgerCommand): string {
  switch (command.type) {
    case 'RecordPayment':
      return `payment:${command.invoiceId}`;
    case 'ReleaseHold':
      return `hold_release:${command.invoiceId}`;
    case 'ReleaseDueHolds':
      // Never an entry's cause: each release it posts carries its hold's (hold_release:<invoiceId>).
      return `due_holds:${command.at}`;
    case 'ReserveFunds':
      return `reserve:${command.reservationId}`;
    case 'SettleReservation':
      return `settle:${command.reservationId}`;
    case 'ReleaseReservation':
      return `release:${command.reservationId}`;
  }
}

/**
 * The most releases one ReleaseDueHolds posts: a backlog is released in appends of this
 * size (each small enough for any store, and decided and appended quickly enough not to
 * lose every race with the hold-release worker), the next decided on the ledger as it then is.
 */
export const RELEASES_PER_DECISION = 200;

/** A whole number of kopecks within the largest single amount the gateway handles. */
const isAmount = (n: unknown, allowZero = false): n is Kopecks =>
  typeof n === 'number' && Number.isSafeInteger(n) && (allowZero ? n >= 0 : n > 0) && n <= MAX_MONEY_KOPECKS;

/** Own entries only: an id such as `constructor` or `__proto__` is just an id. */
const lookup = <T>(record: Readonly<Record<string, T>>, id: string): T | undefined => (Object.hasOwn(record, id) ? record[id] : undefined);

/**
 * Thrown by `decide` when only the entries older than the window could tell whether
 * the command's cause already posted and the command does not carry the log's
 * answer (`postedBeforeWindow`): a bug of the caller, never a merchant's error.
 */
export class CauseHistoryMissingError extends Error {
  constructor(readonly ledgerCause: string) {
    super(`cause ${ledgerCause}: the ledger is longer than its window of recent causes and the command does not say whether an older entry posted it`);
    this.name = 'CauseHistoryMissingError';
  }
}

/**
 * Whether the command's cause already posted, as far as the state alone can tell:
 * a cause in the window of recent causes did; what is still open tells for some
 * causes whatever their age (an open hold was opened by its payment and not yet
 * released; an open reservation was reserved and neither settled nor released,
 * since every cause posts at most once); a ledger the window holds whole has posted
 * nothing else. Otherwise only the older entries can tell: 'ask the log'.
 */
function postedAsFarAsStateTells(command: LedgerCommand, state: LedgerState): boolean | 'ask the log' {
  // Releases only holds still open, whose releases therefore never posted.
  if (command.type === 'ReleaseDueHolds') return false;
  if (hasRecentCause(state, causeOf(command))) return true;
  switch (command.type) {
    case 'RecordPayment':
      if (state.holds.has(command.invoiceId)) return true;
      break;
    case 'ReleaseHold':
      if (state.holds.has(command.invoiceId)) return false;
      break;
    case 'ReserveFunds':
      if (lookup(state.reservations, command.reservationId)) return true;
      break;
    case 'SettleReservation':
    case 'ReleaseReservation':
      if (lookup(state.reservations, command.reservationId)) return false;
      break;
  }
  return entriesBeforeWindow(state) === 0 ? false : 'ask the log';
}

/**
 * True when deciding the command needs the log's answer to "did an entry older than
 * the window post this cause?" (`postedBeforeWindow`): only on a ledger longer than
 * the window, for a cause neither in the window nor told by what is open.
 */
export const needsCauseLookup = (command: LedgerCommand, state: LedgerState): boolean => postedAsFarAsStateTells(command, state) === 'ask the log';

/**
 * The entries the command posts: [] when its cause already posted (an idempotent
 * repeat, however old), or a LedgerError when it may not post.
 */
export function decide(command: LedgerCommand, state: LedgerState): LedgerEvent[] | LedgerError {
  const cause = causeOf(command);
  const told = postedAsFarAsStateTells(command, state);
  const posted = told === 'ask the log' ? command.postedBeforeWindow : told;
  if (posted === undefined) throw new CauseHistoryMissingError(cause);
  if (posted) return [];
  if (Number.isNaN(Date.parse(command.at))) return new Refusal<LedgerErrorCode>('invalid_time', `Некорректное время решения: ${command.at}`);
  // Dated as toISOString writes the instant: the log's folds (ms) and the read model's SQL (µs, its own zone) then agree on every period bound.
  const occurredAt = new Date(command.at).toISOString();
  const entry = (kind: EntryKind, postings: Posting[], extra: Partial<LedgerEntryPostedData> = {}): LedgerEvent[] => [
    {
      type: 'LedgerEntryPosted',
      data: { entryId: command.entryId, kind, cause, postings, occurredAt, ...extra },
    },
  ];

  switch (command.type) {
    case 'RecordPayment': {
      const gross = command.netAmount + command.feeAmount;
      if (!isAmount(command.netAmount, true) || !isAmount(command.feeAmount, true) || !isAmount(gross)) {
        return new Refusal<LedgerErrorCode>('invalid_amount', 'Сумма платежа и комиссии должна быть неотрицательным целым числом копеек, не нулём');
      }
      // A hold of nothing is no hold: zero net goes nowhere and there is nothing to release later.
      const held = command.releaseAt !== null && command.netAmount > 0;
      const postings: Posting[] = [{ account: 'acquiring_clearing', amount: -gross }];
      if (command.netAmount > 0) postings.push({ account: held ? 'pending' : 'available', amount: command.netAmount });
      if (command.feeAmount > 0) postings.push({ account: 'fees', amount: command.feeAmount });
      return entry('payment_recorded', postings, {
        hold: held ? { invoiceId: command.invoiceId, amount: command.netAmount, releaseAt: command.releaseAt } : undefined,
        invoiceId: command.invoiceId,
      });
    }
    case 'ReleaseDueHolds': {
      if (!isAmount(command.amount, true)) return new Refusal<LedgerErrorCode>('invalid_amount', 'Сумма должна быть неотрицательным целым числом копеек');
      return holdsToRelease(state, command.at, command.amount)
        .slice(0, RELEASES_PER_DECISION)
        .map((invoiceId) => {
          const amount = state.holds.get(invoiceId)!.amount;
          const releaseCause = `hold_release:${invoiceId}`;
          const postings: Posting[] = [
            { account: 'pending', amount: -amount },
            { account: 'available', amount },
          ];
          const data: LedgerEntryPostedData = {
            entryId: ledgerEntryId(command.ledger, releaseCause),
            kind: 'hold_released',
            cause: releaseCause,
            postings,
            occurredAt: command.at,
            invoiceId,
          };
          return { type: 'LedgerEntryPosted', data };
        });
    }
    case 'ReleaseHold': {
      const hold = state.holds.get(command.invoiceId);
      if (!hold) return new Refusal<LedgerErrorCode>('hold_not_found', `Нет удержания по счёту ${command.invoiceId}`);
      if (hold.releaseAt !== null && Date.parse(hold.releaseAt) > Date.parse(command.at)) {
        return new Refusal<LedgerErrorCode>('hold_not_due', `Удержание по счёту ${command.invoiceId} действует до ${hold.releaseAt}`);
      }
      const postings: Posting[] = [
        { account: 'pending', amount: -hold.amount },
        { account: 'available', amount: hold.amount },
      ];
      return entry('hold_released', postings, { invoiceId: command.invoiceId });
    }
    case 'ReserveFunds': {
      if (!isAmount(command.amount)) return new Refusal<LedgerErrorCode>('invalid_amount', 'Сумма резерва должна быть положительным целым числом копеек');
      const reservation = { id: command.reservationId, purpose: command.purpose, amount: command.amount };
      // Never dated before an entry already in the ledger (a release whose money it may take).
      const occurredAt = laterOf(command.at, state.latestAt);
      const refusal = reservationRefusal(command, state);
      if (refusal) {
        if (command.recordRefusal) return entry('reservation_refused', [], { reservation, refusal: refusal.code, occurredAt });
        return new Refusal<LedgerErrorCode>(refusal.code, refusal.message);
      }
      return entry(
        'funds_reserved',
        [
          { account: 'available', amount: -command.amount },
          { account: 'reserved', amount: command.amount },
        ],
        {
          reservation,
          payoutFingerprint: command.payout?.fingerprint,
          // The duplicate window counts from the request, also when the entry is dated later.
          ...(command.payout && occurredAt !== command.at ? { payoutRequestedAt: command.at } : {}),
          occurredAt,
        },
      );
    }
    case 'SettleReservation': {
      const reservation = lookup(state.reservations, command.reservationId);
      if (!reservation) return new Refusal<LedgerErrorCode>('reservation_not_found', `Нет открытого резерва ${command.reservationId}`);
      const fee = command.feeAmount ?? 0;
      if (!isAmount(fee, true) || fee > reservation.amount || (fee > 0 && reservation.purpose !== 'payout')) {
        return new Refusal<LedgerErrorCode>('invalid_amount', 'Комиссия выплаты должна быть от нуля до суммы резерва');
      }
      const outgoing: LedgerAccount = reservation.purpose === 'refund' ? 'refunds_paid' : 'payouts_sent';
      const postings: Posting[] = [{ account: 'reserved', amount: -reservation.amount }];
      if (reservation.amount - fee > 0) postings.push({ account: outgoing, amount: reservation.amount - fee });
      if (fee > 0) postings.push({ account: 'fees', amount: fee });
      return entry('reservation_settled', postings, {
        reservation: { id: command.reservationId, purpose: reservation.purpose, amount: reservation.amount },
      });
    }
    case 'ReleaseReservation': {
      const reservation = lookup(state.reservations, command.reservationId);
      if (!reservation) return new Refusal<LedgerErrorCode>('reservation_not_found', `Нет открытого резерва ${command.reservationId}`);
      return entry(
        'reservation_released',
        [
          { account: 'reserved', amount: -reservation.amount },
          { account: 'available', amount: reservation.amount },
        ],
        { reservation: { id: command.reservationId, purpose: reservation.purpose, amount: reservation.amount } },
      );
    }
  }
}

/** Entry kinds that answer a reservation request: which one depends on the balance the decision saw. */
const RESERVATION_ANSWERS: ReadonlySet<EntryKind> = new Set(['funds_reserved', 'reservation_refused']);

/**
 * Whether two entries of one cause, decided apart (by concurrent writers, each on the
 * state it had loaded), post the same money: the same postings and the same facts from
 * the request, whatever the time of each decision. Two answers to one reservation
 * request agree when they are for the same reservation: reserved on one state, refused
 * on another, the first one in the log stands (the reservation's flow reads it from
 * there). Entries that disagree mean the same cause was decided with other amounts:
 * the log and whoever made the refused decision no longer tell the same story.
 */
export function sameMoneyDecided(a: LedgerEntryPostedData, b: LedgerEntryPostedData): boolean {
  if (a.entryId !== b.entryId || a.cause !== b.cause || !sameReservation(a.reservation, b.reservation)) return false;
  if (RESERVATION_ANSWERS.has(a.kind) && RESERVATION_ANSWERS.has(b.kind)) return true;
  return (
    a.kind === b.kind &&
    a.postings.length === b.postings.length &&
    a.postings.every((p, i) => p.account === b.postings[i]!.account && p.amount === b.postings[i]!.amount) &&
    a.invoiceId === b.invoiceId &&
    a.hold?.invoiceId === b.hold?.invoiceId &&
    a.hold?.amount === b.hold?.amount &&
    a.hold?.releaseAt === b.hold?.releaseAt &&
    a.refusal === b.refusal &&
    a.payoutFingerprint === b.payoutFingerprint
  );
}

const sameReservation = (a: LedgerEntryPostedData['reservation'], b: LedgerEntryPostedData['reservation']): boolean =>
  a?.id === b?.id && a?.purpose === b?.purpose && a?.amount === b?.amount;

type ReserveFunds = Extract<LedgerCommand, { type: 'ReserveFunds' }>;

/**
 * The holds a reservation of `amount` at `at` releases first: those due by `at` (their
 * `releaseAt` at or before it), the earliest due first, as many as it takes for
 * `available` to cover `amount` (all of them when it never does). So money is available
 * from its payment's `availableAt`, whether or not the hold-release worker has run yet,
 * and a burst of holds due together costs a reservation no more releases than it needs.
 */
export function holdsToRelease(state: LedgerState, at: string, amount: Kopecks): string[] {
  const released: string[] = [];
  let available = state.balances.available;
  // The earliest due first, ties by invoice id (OpenHolds.dueBy): only the holds taken are visited.
  for (const [invoiceId, hold] of state.holds.dueBy(Date.parse(at))) {
    if (available >= amount) break;
    released.push(invoiceId);
    available += hold.amount;
  }
  return released;
}

/**
 * The ids of the open payout reservations: the payouts the ledger counts as unfinished.
 * One stays open until its outcome is moved (settled or released), so a payout already
 * paid, rejected or cancelled in its own stream may still be among them.
 */
export function openPayoutReservations(state: LedgerState): string[] {
  return Object.keys(state.reservations).filter((id) => state.reservations[id]!.purpose === 'payout');
}

/** Why the reservation may not be made, or null. The payout limits come before the balance. */
function reservationRefusal(command: ReserveFunds, state: LedgerState): { code: ReservationRefusal; message: string } | null {
  const rules = command.payout;
  if (rules) {
    const unfinished = openPayoutReservations(state).length;
    if (unfinished >= rules.maxUnfinished) {
      return { code: 'too_many_pending', message: `Уже ${unfinished} незавершённых заявки на выплату: не больше ${rules.maxUnfinished}` };
    }
    if (rules.duplicateWindowSeconds !== null) {
      const at = Date.parse(command.at);
      const windowMs = rules.duplicateWindowSeconds * 1000;
      // Either order: a request reserved late is checked against one requested after it.
      if (state.recentPayouts.some((p) => p.fingerprint === rules.fingerprint && Math.abs(at - Date.parse(p.at)) < windowMs)) {
        return {
          code: 'duplicate_request',
          message: 'Такая же выплата (сумма и реквизит) создана меньше минуты назад: укажите orderId, если это новая заявка',
        };
      }
    }
  }
  if (state.balances.available < command.amount) {
    return { code: 'insufficient_balance', message: 'Недостаточно средств на доступном балансе' };
  }
  return null;
}

/**
 * The payouts to remember after `e`, given the ledger's latest time with it: those reserved within the window
 * (so two payouts both reserved late by recovery are still compared), each with its request's time.
 */
function rememberPayout(recent: readonly RecentPayout[], e: LedgerEntryPostedData, latestAt: string): readonly RecentPayout[] {
  const latest = Date.parse(latestAt);
  const remembered = (p: RecentPayout): boolean => latest - Date.parse(p.reservedAt ?? p.at) < RECENT_PAYOUT_WINDOW_MS;
  const kept = recent.filter(remembered);
  if (e.kind === 'funds_reserved' && e.payoutFingerprint !== undefined) {
    const payout: RecentPayout =
      e.payoutRequestedAt === undefined
        ? { fingerprint: e.payoutFingerprint, at: e.occurredAt }
        : { fingerprint: e.payoutFingerprint, at: e.payoutRequestedAt, reservedAt: e.occurredAt };
    if (remembered(payout)) kept.push(payout);
  }
  return kept.length === recent.length && kept.every((p, i) => p === recent[i]) ? recent : kept;
}

export function evolve(state: LedgerState, event: LedgerEvent): LedgerState {
  const e = event.data;
  const balances = { ...state.balances } as Record<LedgerAccount, Kopecks>;
  for (const p of e.postings) balances[p.account] = balances[p.account] + p.amount;

  let holds = state.holds;
  let reservations = state.reservations;
  switch (e.kind) {
    case 'payment_recorded':
      if (e.hold) holds = holds.with(e.hold.invoiceId, { amount: e.hold.amount, releaseAt: e.hold.releaseAt });
      break;
    case 'hold_released':
      if (e.invoiceId !== undefined) holds = holds.without(e.invoiceId);
      break;
    case 'funds_reserved':
      if (e.reservation) {
        reservations = { ...reservations, [e.reservation.id]: { purpose: e.reservation.purpose, amount: e.reservation.amount } };
      }
      break;
    case 'reservation_settled':
    case 'reservation_released':
      if (e.reservation) {
        const { [e.reservation.id]: _closed, ...rest } = reservations;
        reservations = rest;
      }
      break;
  }

  const latestAt = laterOf(e.occurredAt, state.latestAt);
  return {
    balances,
    holds,
    reservations,
    recentCauses: rememberCause(state.recentCauses, e.cause),
    recentPayouts: rememberPayout(state.recentPayouts, e, latestAt),
    entries: state.entries + 1,
    latestAt,
  };
}

// ---------------------------------------------------------------------------------
// Invariants (checked by tests, by ledger:verify, and before every append)

export interface InvariantViolation {
  readonly entryId: string | null;
  readonly rule: 'entry_unbalanced' | 'negative_merchant_account' | 'sum_not_zero' | 'hold_mismatch' | 'reservation_mismatch';
  readonly detail: string;
}

export function entryViolations(event: LedgerEvent): InvariantViolation[] {
  const sum = event.data.postings.reduce((s, p) => s + p.amount, 0);
  return sum === 0 ? [] : [{ entryId: event.data.entryId, rule: 'entry_unbalanced', detail: `postings sum to ${sum}, not 0` }];
}

export function stateViolations(state: LedgerState, entryId: string | null = null): InvariantViolation[] {
  const violations: InvariantViolation[] = [];
  for (const account of MERCHANT_ACCOUNTS) {
    if (state.balances[account] < 0) {
      violations.push({ entryId, rule: 'negative_merchant_account', detail: `${account} is ${state.balances[account]}` });
    }
  }
  const sum = LEDGER_ACCOUNTS.reduce((s, a) => s + state.balances[a], 0);
  if (sum !== 0) violations.push({ entryId, rule: 'sum_not_zero', detail: `accounts sum to ${sum}` });
  // Kept as the holds move (OpenHolds.total); summed from the record when a stored state is read.
  const held = state.holds.total;
  if (held !== state.balances.pending) {
    violations.push({ entryId, rule: 'hold_mismatch', detail: `open holds ${held} ≠ pending ${state.balances.pending}` });
  }
  const reserved = Object.values(state.reservations).reduce((s, r) => s + r.amount, 0);
  if (reserved !== state.balances.reserved) {
    violations.push({ entryId, rule: 'reservation_mismatch', detail: `open reservations ${reserved} ≠ reserved ${state.balances.reserved}` });
  }
  return violations;
}

/** `record[id] = value` as an own property, even for ids such as `__proto__`. */
function setOwn<T>(record: Record<string, T>, id: string, value: T): void {
  Object.defineProperty(record, id, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * The same as reducing with `evolve`, in time linear in the events: the balances and
 * reservations are copied once and the events applied to the copy in place (evolve
 * copies the open reservations on every entry); the holds are immutable (OpenHolds).
 */
export function foldLedger(events: readonly LedgerEvent[], from: LedgerState = initialLedgerState()): LedgerState {
  if (events.length === 0) return from;
  const balances = { ...from.balances } as Record<LedgerAccount, Kopecks>;
  let holds = from.holds;
  const reservations: Record<string, OpenReservation> = { ...from.reservations };
  let recentCauses = from.recentCauses;
  let recentPayouts = from.recentPayouts;
  let latestAt = from.latestAt;
  for (const { data: e } of events) {
    latestAt = laterOf(e.occurredAt, latestAt);
    for (const p of e.postings) balances[p.account] = balances[p.account] + p.amount;
    if (e.kind === 'payment_recorded' && e.hold) holds = holds.with(e.hold.invoiceId, { amount: e.hold.amount, releaseAt: e.hold.releaseAt });
    else if (e.kind === 'hold_released' && e.invoiceId !== undefined) holds = holds.without(e.invoiceId);
    else if (e.kind === 'funds_reserved' && e.reservation) {
      setOwn(reservations, e.reservation.id, { purpose: e.reservation.purpose, amount: e.reservation.amount });
    } else if ((e.kind === 'reservation_settled' || e.kind === 'reservation_released') && e.reservation) {
      delete reservations[e.reservation.id];
    }
    recentCauses = rememberCause(recentCauses, e.cause);
    if (recentPayouts.length > 0 || e.payoutFingerprint !== undefined) recentPayouts = rememberPayout(recentPayouts, e, latestAt);
  }
  return { balances, holds, reservations, recentCauses, recentPayouts, entries: from.entries + events.length, latestAt };
}

/**
 * A ledger replayed entry by entry in place, for audits of long logs (ledger:verify):
 * after each `apply` its `state()` is what reducing with `evolve` gives and its
 * `violations()` what `stateViolations` gives, without copying the open holds and
 * reservations on every entry or summing them again (their totals are kept as they move).
 * Without `recentCauses` it keeps no window of recent causes (its state's stays as it
 * started): for an audit that takes the window from the log when it needs it
 * (recentCausesOf), so that a replay of many ledgers holds no causes.
 */
export class LedgerReplay {
  private readonly balances: Record<LedgerAccount, Kopecks>;
  private readonly holds: Record<string, OpenHold>;
  private readonly reservations: Record<string, OpenReservation>;
  private recentCauses: LedgerState['recentCauses'];
  private recentPayouts: LedgerState['recentPayouts'];
  private entries: number;
  private latestAt: string | null;
  private held: number;
  private reserved: number;

  constructor(
    from: LedgerState = initialLedgerState(),
    private readonly options: { readonly recentCauses: boolean } = { recentCauses: true },
  ) {
    this.balances = { ...from.balances } as Record<LedgerAccount, Kopecks>;
    this.holds = from.holds.toRecord();
    this.reservations = { ...from.reservations };
    this.recentCauses = from.recentCauses;
    this.recentPayouts = from.recentPayouts;
    this.entries = from.entries;
    this.latestAt = from.latestAt;
    this.held = Object.values(this.holds).reduce((s, h) => s + h.amount, 0);
    this.reserved = Object.values(this.reservations).reduce((s, r) => s + r.amount, 0);
  }

  apply(event: LedgerEvent): void {
    const e = event.data;
    for (const p of e.postings) this.balances[p.account] = this.balances[p.account] + p.amount;
    if (e.kind === 'payment_recorded' && e.hold) {
      this.held += e.hold.amount - (Object.hasOwn(this.holds, e.hold.invoiceId) ? this.holds[e.hold.invoiceId]!.amount : 0);
      setOwn(this.holds, e.hold.invoiceId, { amount: e.hold.amount, releaseAt: e.hold.releaseAt });
    } else if (e.kind === 'hold_released' && e.invoiceId !== undefined) {
      if (Object.hasOwn(this.holds, e.invoiceId)) this.held -= this.holds[e.invoiceId]!.amount;
      delete this.holds[e.invoiceId];
    } else if (e.kind === 'funds_reserved' && e.reservation) {
      const id = e.reservation.id;
      this.reserved += e.reservation.amount - (Object.hasOwn(this.reservations, id) ? this.reservations[id]!.amount : 0);
      setOwn(this.reservations, id, { purpose: e.reservation.purpose, amount: e.reservation.amount });
    } else if ((e.kind === 'reservation_settled' || e.kind === 'reservation_released') && e.reservation) {
      if (Object.hasOwn(this.reservations, e.reservation.id)) this.reserved -= this.reservations[e.reservation.id]!.amount;
      delete this.reservations[e.reservation.id];
    }
    if (this.options.recentCauses) this.recentCauses = rememberCause(this.recentCauses, e.cause);
    this.entries++;
    this.latestAt = laterOf(e.occurredAt, this.latestAt);
    if (this.recentPayouts.length > 0 || e.payoutFingerprint !== undefined) this.recentPayouts = rememberPayout(this.recentPayouts, e, this.latestAt);
  }

  /** What `stateViolations(this.state(), entryId)` gives. */
  violations(entryId: string | null = null): InvariantViolation[] {
    const violations: InvariantViolation[] = [];
    for (const account of MERCHANT_ACCOUNTS) {
      if (this.balances[account] < 0) violations.push({ entryId, rule: 'negative_merchant_account', detail: `${account} is ${this.balances[account]}` });
    }
    const sum = LEDGER_ACCOUNTS.reduce((s, a) => s + this.balances[a], 0);
    if (sum !== 0) violations.push({ entryId, rule: 'sum_not_zero', detail: `accounts sum to ${sum}` });
    if (this.held !== this.balances.pending) {
      violations.push({ entryId, rule: 'hold_mismatch', detail: `open holds ${this.held} ≠ pending ${this.balances.pending}` });
    }
    if (this.reserved !== this.balances.reserved) {
      violations.push({ entryId, rule: 'reservation_mismatch', detail: `open reservations ${this.reserved} ≠ reserved ${this.balances.reserved}` });
    }
    return violations;
  }

  /** The balances now (a copy). */
  balancesNow(): Balances {
    return { ...this.balances };
  }

  /** The state now (a copy). */
  state(): LedgerState {
    return {
      balances: { ...this.balances },
      holds: OpenHolds.fromRecord(this.holds),
      reservations: { ...this.reservations },
      recentCauses: this.recentCauses,
      recentPayouts: this.recentPayouts,
      entries: this.entries,
      latestAt: this.latestAt,
    };
  }
}
