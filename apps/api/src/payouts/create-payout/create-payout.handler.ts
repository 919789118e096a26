import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { canonicalPayoutAccount, isUsdtMethod, Payout, payoutAmounts, usdtFor, Refusal } from '#domain';
import { formatMoney, MAX_MONEY_KOPECKS } from '#ledger';
import type { KeyedRequest } from '#payments/idempotency';
import { keyedRequestDigest } from '#payments/idempotency';
import type { PayoutAddress } from '#payments/merchants';
import { ORDER_ID_CLAIM_GRACE_SECONDS, PayoutFlow, PayoutRequest } from '#payments/payouts';
import type { Clock } from '#platform/clock';

/** POST /v1/payouts (live keys): the payout recorded under its id, the amount reserved on the live ledger, pending (or its refusal). */
export class CreatePayout extends Command<{ created: boolean; payout: Payout }> {
  constructor(
    readonly accountId: string,
    readonly projectId: string,
    readonly request: PayoutRequest,
    /** The gateway clock: read when the request starts, and again when its payout is decided. */
    readonly clock: Clock,
    /** The request under an Idempotency-Key (no orderId): it claims one payout id, so a retry reaches that payout. */
    readonly keyed: KeyedRequest | null = null,
  ) {
    super();
  }
}

/**
 * Step 1 of the payout flow (see PayoutFlow): the payout's id, claimed for its orderId
 * or Idempotency-Key, and its request written to its stream; then the flow's steps. The
 * write is the payout's first commit: once written, the answer is the payout (201,
 * pending) however the next steps fail; a 5xx comes only from before it.
 */
@CommandHandler(CreatePayout)
export class CreatePayoutHandler implements ICommandHandler<CreatePayout> {
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}

  execute(command: CreatePayout): Promise<{ created: boolean; payout: Payout }> {
    return this.create(command.accountId, command.projectId, command.request, command.clock, command.keyed);
  }

  /**
   * POST /payouts (live keys only: the caller checks the mode). With an orderId, the
   * orderId names the payout. Without one, a keyed request (Idempotency-Key) does: its
   * digest claims one payout id, so running it again (a retry after a crash, or while
   * the first still runs) reaches that payout, created by this request (201).
   */
  private async create(
    accountId: string,
    projectId: string,
    request: PayoutRequest,
    clock: Clock,
    keyed: KeyedRequest | null = null,
  ): Promise<{ created: boolean; payout: Payout }> {
    let now = clock.now();
    let abandonedId: number | null = null;
    if (request.orderId !== null) {
      const repeat = await this.repeatOf(accountId, request.orderId, now);
      if (repeat.payout) return { created: false, payout: repeat.payout };
      // A claim whose request died: ours to use, its grace already waited out (not a second time below).
      abandonedId = repeat.abandonedId;
    }
    const requestKey = request.orderId === null && keyed !== null ? keyedRequestDigest('payout', keyed).toString('hex') : null;
    let keyedId: number | null = null;
    if (requestKey !== null) {
      keyedId = await this.payoutIdOfKey(accountId, requestKey);
      if (keyedId !== null) {
        const written = await this.flow.load(keyedId);
        if (written.status !== 'none') return { created: true, payout: await this.flow.answerOf(written, now, 'finishing') };
      }
    }
    const address = await this.resolveAddress(accountId, request);
    const terms = this.flow.terms[address.method];
    if (request.amount < terms.min) {
      throw new Refusal('amount_out_of_range', `Сумма выплаты меньше минимальной (${formatMoney(terms.min)} ₽ для ${address.method})`, 'amount');
    }
    // A well-formed amount above the largest one the gateway handles (read as MONEY_ABOVE_MAXIMUM) is too much, whatever the balance.
    if (request.amount > MAX_MONEY_KOPECKS) {
      throw new Refusal('amount_out_of_range', `Сумма выплаты больше максимальной (${formatMoney(MAX_MONEY_KOPECKS)} ₽)`, 'amount');
    }
    const amounts = payoutAmounts(request.amount, terms);
    const rate = isUsdtMethod(address.method) ? await this.flow.usdtRate.rubPerUsdt() : null;

    let payoutId: number;
    if (requestKey !== null) payoutId = keyedId ?? (await this.claimIdForKey(accountId, requestKey));
    else if (request.orderId === null) payoutId = await this.nextId();
    else if (abandonedId !== null) {
      // Looked at before the address and the rate: taken over only if still the abandoned claim it was (its request may
      // since have written it, been refused and freed the orderId, or another retry may have taken it over first).
      if (!(await this.takeOver(accountId, request.orderId, abandonedId))) return this.create(accountId, projectId, request, clock, keyed);
      payoutId = abandonedId;
    } else {
      const claim = await this.flow.pool.query<{ payout_id: string }>(
        `INSERT INTO payout_order_ids (account_id, order_id, payout_id) VALUES ($1, $2, nextval('payout_ids'))
         ON CONFLICT (account_id, order_id) DO NOTHING RETURNING payout_id`,
        [accountId, request.orderId],
      );
      if (claim.rows[0]) payoutId = Number(claim.rows[0].payout_id);
      else {
        // A concurrent request with this orderId claimed it first: its payout is the answer
        // (or, when that request died before writing it, the id is ours to use).
        const repeat = await this.repeatOf(accountId, request.orderId, now);
        if (repeat.payout) return { created: false, payout: repeat.payout };
        if (repeat.abandonedId === null || !(await this.takeOver(accountId, request.orderId, repeat.abandonedId))) {
          return this.create(accountId, projectId, request, clock, keyed);
        }
        payoutId = repeat.abandonedId;
      }
    }
    // Dated when it is decided, not when the request came (an orderId claimed by a request that died is waited on for
    // seconds above): its reservation carries this time, and a finance report as of an earlier instant is final already.
    now = clock.now();
    const requested = await this.flow.decide(payoutId, {
      type: 'RequestPayout',
      data: {
        payoutId,
        accountId,
        projectId,
        method: address.method,
        addressId: address.id,
        account: address.account,
        bank: address.bank,
        orderId: request.orderId,
        comment: request.comment,
        ...amounts,
        usdtAmount: rate === null ? null : usdtFor(amounts.netAmount, rate),
        usdtRate: rate,
        source: 'api',
        createdAt: now.toISOString(),
      },
    });
    // A claim taken over is never sure its request died: a live one, slow to write, may have written this payout first
    // (its decide met here as a conflict, nothing emitted). The answer goes by who wrote it, not by a claim renewed while
    // the request lives (a paused process renews nothing): a payout this request did not write answers its orderId as a
    // repeat (200, that payout; refused, the orderId is free again and claimed anew), never 201 with another's payout.
    if (request.orderId !== null && requested.events.length === 0) return this.create(accountId, projectId, request, clock, keyed);
    // Written (or, keyed, found written by an earlier run of this request): the payout exists.
    // The flow's steps (due holds released, the reservation) go by the request's date: dated again if it was late.
    const decidedAt = requested.events.length > 0 ? new Date(requested.state.requested.createdAt) : now;
    return { created: true, payout: await this.flow.answerOf(requested.state, decidedAt, requested.events.length > 0 ? 'answering' : 'finishing') };
  }

  /**
   * What an orderId already stands for: its payout (taken through the ledger's
   * decision if that is still to come), or the id of a claim whose request died
   * before writing its payout, or nothing (never claimed, or refused and given up).
   */
  private async repeatOf(accountId: string, orderId: string, now: Date): Promise<{ payout: Payout | null; abandonedId: number | null }> {
    for (;;) {
      const claimed = await this.flow.pool.query<{ payout_id: string; graced: boolean }>(
        `SELECT payout_id, claimed_at <= clock_timestamp() - make_interval(secs => $3) AS graced
           FROM payout_order_ids WHERE account_id = $1 AND order_id = $2`,
        [accountId, orderId, ORDER_ID_CLAIM_GRACE_SECONDS],
      );
      if (!claimed.rows[0]) return { payout: null, abandonedId: null };
      const payoutId = Number(claimed.rows[0].payout_id);
      const payout = await this.flow.load(payoutId);
      if (payout.status === 'refused') {
        // Refused: its claim is given up (here too, should the refusing request have died first).
        await this.flow.releaseClaim(accountId, orderId, payoutId);
        continue;
      }
      if (payout.status !== 'none') {
        try {
          return { payout: await this.flow.answerOf(payout, now, 'finishing'), abandonedId: null };
        } catch (error) {
          if (error instanceof Refusal && error.code !== 'not_found') continue;
          throw error;
        }
      }
      // Claimed, not yet written: the claiming request is on its way; once the claim is older than the grace it is taken
      // as dead (counted from the claim: a retry that first waited out the dead request's key lease finds it that old).
      if (claimed.rows[0].graced) return { payout: null, abandonedId: payoutId };
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * Takes over an orderId's claim on `payoutId` if it is still that claim and still older than the grace: its age
   * starts again, so a second retry waits for this one instead of taking it over too. False: released or taken meanwhile.
   */
  private async takeOver(accountId: string, orderId: string, payoutId: number): Promise<boolean> {
    const taken = await this.flow.pool.query(
      `UPDATE payout_order_ids SET claimed_at = clock_timestamp()
        WHERE account_id = $1 AND order_id = $2 AND payout_id = $3 AND claimed_at <= clock_timestamp() - make_interval(secs => $4)`,
      [accountId, orderId, payoutId, ORDER_ID_CLAIM_GRACE_SECONDS],
    );
    return taken.rowCount === 1;
  }

  private async resolveAddress(accountId: string, request: PayoutRequest): Promise<PayoutAddress> {
    let address: PayoutAddress | null;
    if (request.addressId !== undefined) {
      address = await this.flow.addresses.byId(accountId, request.addressId);
      if (address && request.method !== undefined && request.account !== undefined) {
        const same = address.method === request.method && canonicalPayoutAccount(request.method, request.account) === address.account;
        if (!same) throw new Refusal('validation', 'addressId и method + account указывают на разные реквизиты', 'account');
      }
    } else {
      address = await this.flow.addresses.byAccount(accountId, request.method!, request.account!);
    }
    if (!address) throw new Refusal('address_not_found', 'Реквизит для выплаты не найден', request.addressId !== undefined ? 'addressId' : 'account');
    if (address.status !== 'confirmed') {
      throw new Refusal('address_not_confirmed', 'Реквизит для выплаты не подтверждён', request.addressId !== undefined ? 'addressId' : 'account');
    }
    return address;
  }

  /** The payout id a keyed request claimed, or null. */
  private async payoutIdOfKey(accountId: string, requestKey: string): Promise<number | null> {
    const r = await this.flow.pool.query<{ payout_id: string }>('SELECT payout_id FROM payout_request_keys WHERE account_id = $1 AND request_key = $2', [
      accountId,
      requestKey,
    ]);
    return r.rows[0] ? Number(r.rows[0].payout_id) : null;
  }

  /** Claims a payout id for a keyed request; a concurrent run of the same request may have claimed it first: that one. */
  private async claimIdForKey(accountId: string, requestKey: string): Promise<number> {
    const claim = await this.flow.pool.query<{ payout_id: string }>(
      `INSERT INTO payout_request_keys (account_id, request_key, payout_id) VALUES ($1, $2, nextval('payout_ids'))
       ON CONFLICT (account_id, request_key) DO NOTHING RETURNING payout_id`,
      [accountId, requestKey],
    );
    if (claim.rows[0]) return Number(claim.rows[0].payout_id);
    return (await this.payoutIdOfKey(accountId, requestKey))!;
  }

  private async nextId(): Promise<number> {
    const r = await this.flow.pool.query<{ id: string }>(`SELECT nextval('payout_ids') AS id`);
    return Number(r.rows[0]!.id);
  }
}
