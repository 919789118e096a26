import type { Pool, PoolClient } from 'pg';
import { inTransaction, preparedStatement, writeStatement } from '#platform/database';
import type { Clock } from '#platform/clock';
import { Refusal } from '#domain';
import { type Registry, UnopenableWebhookSecretError } from '../merchants';
import { AttemptResult, WebhookHttpClient, WebhookPoster } from './http-delivery';
import {
  attemptOutcome,
  standardWebhookSignature,
  TIMESTAMPED_SIGNATURE_HEADER,
  WEBHOOK_REPLY_TIMEOUT_MS,
  webhookSignature,
  webhookTimestampedSignature,
} from './webhook-rules';

/** How long a dispatcher leaves out of its claims a URL whose project's secret it cannot open (real time). */
const UNSIGNABLE_URL_LEFT_OUT_MS = 15_000;

/** How long a claimed delivery is out of other dispatchers' reach (real time): one attempt (at most 10 s) and a margin. */
export const WEBHOOK_LEASE_SECONDS = 15;

/** What a claim of a due delivery answers. */
interface ClaimedRow {
  id: string;
  /** The event's id: the body's `id`, and Standard Webhooks' `webhook-id` (the same for every attempt and resend). */
  event_id: string;
  event_type: string;
  project_id: string;
  url: string;
  body: string;
  is_test: boolean;
  /** This claim's lease: the attempt's outcome moves the delivery only while the row still carries it. */
  lease_token: string;
  /** Attempts counted so far and the count at the last resend (the retry schedule's start), as the claim found them. */
  attempts_made: number;
  schedule_base: number;
  /** The project's webhook secret as stored (sealed); null when the project no longer exists. */
  webhook_secret: string | null;
  /** SECRET_GENERATION when the secret was read: another one in force makes it read again before the attempt. */
  secret_generation: string;
  /** SECRET_READ_AT of that read. */
  secret_read_at: string;
}

interface ClaimedDelivery extends ClaimedRow {
  /** performance.now() before the claim (or its renewal) was asked for: the lease lasts at least `leaseSeconds` from here. */
  leasedAt: number;
  /** Claimed (or renewed) in the turn that is starting it: sent however long it waited (if its secret is the one in force). */
  fresh: boolean;
}

/** An attempt made, waiting to be recorded with the others of its batch. */
interface FinishedAttempt {
  readonly delivery: ClaimedDelivery;
  /** The attempt's moment on the clock (its X-Service-Timestamp). */
  readonly at: Date;
  /** The clock when the reply (or the failure) came: the retry schedule counts from here. */
  readonly endedAt: Date;
  readonly result: AttemptResult;
}

export interface DispatcherOptions {
  /** Attempts sent at once by one dispatcher (HTTP requests in flight). */
  readonly concurrency: number;
  /**
   * Attempts to one URL sent at once by one dispatcher (default a quarter of
   * `concurrency`), reached one answer at a time: a URL starts with one slot, gains one
   * per answer and is back to one after an attempt without an answer or when idle, so a
   * receiver that hangs holds one slot and the others stay free for everybody else's webhooks.
   */
  readonly perUrlConcurrency?: number;
  /** false: every URL has all its slots from the start, whether it answers or not (tests of other behaviour; default true). */
  readonly slowStart?: boolean;
  /**
   * Deliveries of one URL claimed ahead of its free slots and sent as they free
   * (default 16 × perUrlConcurrency; 0: none): the next attempt to a busy URL starts
   * when the previous answers, not a database round trip later. A URL is refilled when
   * half of this went out, so a refill has the other half's time to come back. All
   * URLs together hold at most 4 × concurrency claimed ahead.
   */
  readonly prefetchPerUrl?: number;
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS: deliveries of both modes may go to loopback, private and reserved addresses. */
  readonly allowPrivateNetworks: boolean;
  readonly timeoutMs?: number;
  /** How long a claim keeps other dispatchers away, in real seconds (default WEBHOOK_LEASE_SECONDS; tests shorten it). */
  readonly leaseSeconds?: number;
  /** How often a dispatcher started with `start()` looks for due deliveries when nothing woke it (default 100 ms). */
  readonly pollIntervalMs?: number;
  /** At most this many attempts recorded in one transaction (default 500). */
  readonly recordBatch?: number;
  /**
   * How long (real milliseconds, default 10) finished attempts wait for others to join
   * their batch before it is recorded: fewer, larger record statements. Never longer:
   * a batch of `recordBatch` is recorded at once, and so is everything when the
   * dispatcher stops. 0: recorded at the next turn of the event loop.
   */
  readonly recordGatherMs?: number;
  /** The HTTP client (default a WebhookHttpClient of these options; tests of the dispatcher may pass their own). */
  readonly client?: WebhookPoster;
  /**
   * Called with each recorded attempt's outcome (metrics): delivered, a retry scheduled,
   * failed for good, or superseded (its lease had been replaced before it came back).
   */
  readonly onAttempt?: (outcome: WebhookAttemptOutcome) => void;
}

export type WebhookAttemptOutcome = 'delivered' | 'retry' | 'failed' | 'superseded';

/** A claimed delivery waiting longer than this (lease minus attempt) has its lease renewed before it is sent. */
const LEASE_MARGIN_MS = 1000;
/** URLs whose slots beyond one are remembered; past this the memory starts again (each URL back to one slot). */
const MAX_URLS_WITH_SLOTS = 10_000;
/** A URL that has not answered for this long (real ms) with nothing in flight starts again from one slot. */
const SLOW_START_IDLE_MS = 1000;
/** How many URLs that ran dry with slots earned a wide claim tells the database about. */
const DRY_URLS_KEPT = 256;
/** How often the dispatcher looks whether a webhook secret was rotated (followSecretRotations). */
const SECRET_LOOK_MS = 200;
/**
 * What a delivery's secret is read with: `<server start>:<row version>:<counter>`, the
 * rotation counter (webhook_secret_changes, raised by a trigger; a missing row reads 0)
 * with its row's version (xmin: any write of it, a counter set back and raised to the same
 * number too, reads as another) and the server's start (a database restored or failed over).
 */
const SECRET_GENERATION = `((extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint::text || ':' ||
  coalesce((SELECT g.xmin::text || ':' || g.generation::text FROM webhook_secret_changes g), '0:0'))`;
/**
 * When it was read, in the server's order of snapshots (one past the latest transaction id
 * completed: never lower in a later snapshot): reads sent on several connections reach the
 * server in any order.
 */
const SECRET_READ_AT = `pg_snapshot_xmax(pg_current_snapshot())::text`;
/** The server and the counter of a SECRET_GENERATION value. */
const serverOf = (generation: string): string => generation.slice(0, generation.indexOf(':'));
const counterOf = (generation: string): bigint => BigInt(generation.slice(generation.lastIndexOf(':') + 1));

/**
 * How long finished attempts wait for others to join their record batch (real ms): at
 * 5,000 attempts/s a batch of about 50 instead of the dozen that finish during one
 * record's round trip (decision 0094).
 */
const RECORD_GATHER_MS = 10;

/** A claim that looks behind the earliest due rows visits at least this many URLs (besides those it leaves out). */
const URLS_VISITED_AT_LEAST = 64;

/*
 * The claims. Both take due deliveries, earliest first, at most $2 (the room), at most
 * $5 per URL counting what the dispatcher already holds of it ($7 URLs, $8 counts), none
 * of the URLs left out ($4), each locked (FOR UPDATE SKIP LOCKED) and leased for $3
 * seconds with a fresh token. Neither reads the backlog of a URL it leaves out row by
 * row: one stuck or busy URL can have tens of thousands of due rows (decision 0094).
 *
 * - CLAIM_EARLIEST (a refill): the first $6 due rows not leased, from the due-time
 *   index, then those of URLs not left out, within each URL's cap. Its cost is $6 rows,
 *   whatever the backlogs; the rows of URLs left out count against the $6 (they are
 *   not skipped past), so behind a backlog it may find nothing for the others.
 * - CLAIM_LOOKING_BEHIND (at least every poll interval, leaving out every URL in hand):
 *   the same earliest rows; when they are not enough (the look filled its window, so
 *   more due rows lie behind, and fewer than the room are usable) it looks behind them
 *   by URL instead of by time: a loose scan of `webhook_queue_url_due` (url,
 *   next_attempt_at), one index descent per URL, that steps over each URL left out
 *   without reading its backlog and counts each other URL's available rows up to its
 *   allowance. The scan stops once the URLs visited have the room's worth of rows, or
 *   after $10 URLs; it starts after $9 (where the previous one stopped) and goes round,
 *   so with more URLs than one scan visits every URL is reached within a few claims.
 *   Rows found behind are ordered by due time among themselves and with the earliest
 *   rows, not with those of URLs the scan did not visit. Every row it answers (a single
 *   row with no delivery when nothing was claimed) carries `scanned_to`, the last URL
 *   the scan visited (null: no scan).
 */

/** The first $6 due rows not leased, in due order, and what the dispatcher holds per URL. */
const EARLIEST_AND_BUSY = `
  earliest AS MATERIALIZED (
    SELECT id, url, next_attempt_at, seq FROM webhook_queue
    WHERE next_attempt_at <= $1 AND (leased_until IS NULL OR leased_until < clock_timestamp())
      -- A lease lost in a database crash is only claimed again: its commit need not wait for the disk.
      AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
    ORDER BY next_attempt_at LIMIT $6),
  busy AS MATERIALIZED (SELECT * FROM unnest($7::text[], $8::int[]) AS b(url, n))`;

/**
 * Takes `candidates` (id, url, next_attempt_at, seq): within each URL's cap, earliest
 * first, each locked as it is taken (a row another claim holds is skipped) until the
 * room is full, then leased.
 */
const LEASE_CANDIDATES = `
  capped AS (
    SELECT c.id, c.next_attempt_at
    FROM (SELECT id, url, next_attempt_at, row_number() OVER (PARTITION BY url ORDER BY next_attempt_at, seq) AS nth FROM candidates) AS c
    LEFT JOIN busy ON busy.url = c.url
    WHERE c.nth + coalesce(busy.n, 0) <= $5),
  due AS (
    SELECT l.id FROM (SELECT id, next_attempt_at FROM capped ORDER BY next_attempt_at) AS c
    CROSS JOIN LATERAL (
      SELECT q.id FROM webhook_queue q
      WHERE q.id = c.id AND q.next_attempt_at <= $1 AND (q.leased_until IS NULL OR q.leased_until < clock_timestamp())
      FOR UPDATE SKIP LOCKED) AS l
    LIMIT $2),
  -- The rows locked, each found by its key (a join could read the whole queue).
  leased AS (
    UPDATE webhook_queue q SET leased_until = clock_timestamp() + make_interval(secs => $3), lease_token = gen_random_uuid()
    WHERE q.id = ANY (ARRAY(SELECT id FROM due))
    RETURNING q.id, q.lease_token, q.attempts_made, q.schedule_base),
  -- The lease, the attempts counted and the schedule's base from the queue row as it is once
  -- locked; what the delivery sends (never changed once enqueued) from its record, looked up
  -- by id for each row leased (never a join that could read the whole history).
  claimed AS (
    SELECT d.id, d.event_id, d.event_type, d.project_id, d.url, d.body, d.is_test, l.lease_token, l.attempts_made, l.schedule_base,
           (SELECT p.webhook_secret FROM projects p WHERE p.id = d.project_id) AS webhook_secret,
           ${SECRET_GENERATION} AS secret_generation, ${SECRET_READ_AT} AS secret_read_at
    FROM leased l
    CROSS JOIN LATERAL (
      SELECT r.id, r.event_id, r.event_type, r.project_id, r.url, r.body, r.is_test FROM webhook_deliveries r WHERE r.id = l.id OFFSET 0) AS d)`;

export const CLAIM_EARLIEST = `WITH ${EARLIEST_AND_BUSY},
  candidates AS (SELECT * FROM earliest WHERE url <> ALL($4::text[])),
  ${LEASE_CANDIDATES}
SELECT * FROM claimed`;

/** The first pending URL after `after` in the order of `webhook_queue_url_due` (one index descent). */
const urlAfter = (after: string) => `(SELECT w.url FROM webhook_queue w WHERE w.url > ${after} ORDER BY w.url LIMIT 1)`;
const FIRST_URL = `(SELECT w.url FROM webhook_queue w ORDER BY w.url LIMIT 1)`;

/**
 * How many due rows not leased URL `x` has that the claim may take (0 for a URL left
 * out): at most its allowance ($5 less what the dispatcher holds of it) and the room.
 * Read from `webhook_queue_url_due` in due order (row comparisons only that index
 * can serve, whatever the statistics say).
 */
const availableOf = (x: string) => `
  SELECT CASE WHEN ${x} = ANY($4::text[]) THEN 0 ELSE (
    SELECT count(*)::int FROM (
      SELECT FROM webhook_queue w
      WHERE (w.url, w.next_attempt_at) >= (${x}, '-infinity') AND (w.url, w.next_attempt_at) <= (${x}, $1)
        AND (w.leased_until IS NULL OR w.leased_until < clock_timestamp())
      ORDER BY w.url, w.next_attempt_at
      LIMIT greatest(0, least($2, $5 - coalesce((SELECT b.n FROM busy b WHERE b.url = ${x}), 0)))) AS r) END AS here OFFSET 0`;

export const CLAIM_LOOKING_BEHIND = `WITH RECURSIVE ${EARLIEST_AND_BUSY},
  behind AS MATERIALIZED (
    SELECT count(*) >= $6 AND count(*) FILTER (WHERE usable) < $2 AS wanted
    FROM (SELECT e.url <> ALL($4::text[]) AND row_number() OVER (PARTITION BY e.url ORDER BY e.next_attempt_at, e.seq) + coalesce(b.n, 0) <= $5 AS usable
          FROM earliest e LEFT JOIN busy b ON b.url = e.url) AS judged),
  urls(url, wrapped, visited, found, here) AS (
    SELECT f.url, f.wrapped, 1, h.here, h.here
    FROM (SELECT coalesce(a.url, ${FIRST_URL}) AS url, a.url IS NULL AS wrapped
          FROM (SELECT ${urlAfter('$9')} AS url OFFSET 0) AS a
          WHERE (SELECT wanted FROM behind) OFFSET 0) AS f
    CROSS JOIN LATERAL (${availableOf('f.url')}) AS h
    WHERE f.url IS NOT NULL
    UNION ALL
    SELECT n.url, n.wrapped, u.visited + 1, u.found + h.here, h.here
    FROM urls u
    CROSS JOIN LATERAL (
      SELECT coalesce(a.url, CASE WHEN NOT u.wrapped THEN ${FIRST_URL} END) AS url, u.wrapped OR a.url IS NULL AS wrapped
      FROM (SELECT ${urlAfter('u.url')} AS url OFFSET 0) AS a OFFSET 0) AS n
    CROSS JOIN LATERAL (${availableOf('n.url')}) AS h
    WHERE u.visited < $10 AND u.found < $2 AND n.url IS NOT NULL AND NOT (n.wrapped AND n.url > $9)),
  found AS (
    SELECT r.id, r.url, r.next_attempt_at, r.seq
    FROM urls u
    CROSS JOIN LATERAL (
      SELECT w.id, w.url, w.next_attempt_at, w.seq FROM webhook_queue w
      WHERE (w.url, w.next_attempt_at) >= (u.url, '-infinity') AND (w.url, w.next_attempt_at) <= (u.url, $1)
        AND (w.leased_until IS NULL OR w.leased_until < clock_timestamp())
      ORDER BY w.url, w.next_attempt_at LIMIT u.here) AS r
    WHERE u.here > 0),
  candidates AS (SELECT * FROM earliest WHERE url <> ALL($4::text[]) UNION SELECT * FROM found),
  ${LEASE_CANDIDATES}
SELECT c.*, s.scanned_to
FROM (SELECT (SELECT url FROM urls ORDER BY visited DESC LIMIT 1) AS scanned_to) AS s LEFT JOIN claimed c ON true`;

/**
 * Sends due webhook deliveries. Claims take due rows in batches (FOR UPDATE SKIP
 * LOCKED, then a lease with a fresh token per row); each is posted over the client's
 * pooled keep-alive connections, at most `concurrency` at once and at most
 * `perUrlConcurrency` to one URL; the outcomes are recorded in batches, one
 * transaction for all the attempts that came back meanwhile: 2xx within 10 s →
 * delivered; otherwise the next attempt is scheduled on the clock (1 min, 5 min,
 * 30 min, 2 h, 12 h, 24 h, counted from the attempt's end) and after the last one it
 * has failed. A dispatcher that dies mid-attempt leaves the lease to run out: the
 * attempt is made again (at least once; the receiver deduplicates by the event id).
 *
 * Every claim takes a fresh lease token, and an attempt's outcome moves the delivery
 * only while the row still carries the token of its claim. An attempt that comes back
 * after its lease was taken over (it ran out and another dispatcher claimed the row)
 * or after the operator's resend is recorded in the history, marked superseded, and
 * changes nothing else: it cannot turn a delivered row back to pending. Attempts are
 * numbered in the order they are recorded, under the delivery rows' locks.
 *
 * A delivery claimed ahead (its URL's slots busy) is sent only while its lease still
 * covers a whole attempt: one that waited longer has its lease renewed first (with its
 * token: a delivery whose token was replaced meanwhile is dropped unsent, its new
 * holder sends it).
 *
 * Driven either by `start()` (its own loop: a claim when slots free up, else every
 * `pollIntervalMs`) or by calling `tick()`.
 */
export class WebhookDispatcher {
  private readonly client: WebhookPoster;
  private readonly ownClient: boolean;
  private readonly perUrl: number;
  private readonly prefetchPerUrl: number;
  /** Claimed-not-sent plus in-flight, over all URLs, beyond which only free slots make room for claims. */
  private readonly maxClaimed: number;
  /** Claimed and not yet recorded (including attempts waiting for their batch), at most. */
  private readonly maxHeld: number;
  private readonly leaseMs: number;
  private readonly timeoutMs: number;
  private readonly recordBatch: number;
  private readonly recordGatherMs: number;

  /** HTTP attempts in flight, in all and per URL. */
  private inFlight = 0;
  private readonly inFlightByUrl = new Map<string, number>();
  /**
   * Attempts a URL may have in flight now (1 for a URL not in the map), up to `perUrl`:
   * one more per answer, one again after an attempt that got none (timed out, refused,
   * reset). So a receiver that hangs holds one slot, not `perUrl`, and hanging
   * receivers cannot fill the dispatcher while other URLs wait.
   */
  private readonly slotsByUrl = new Map<string, { readonly slots: number; readonly answeredAt: number }>();
  /**
   * URLs with more than one slot that ran dry (nothing claimed) since their last answer,
   * the latest DRY_URLS_KEPT: a wide claim gives them what they earned, as the only claim
   * that reaches a URL due behind another's backlog.
   */
  private readonly dryUrls = new Set<string>();
  /** The URLs of the deliveries whose leases are being renewed (held, in neither queue nor flight). */
  private readonly renewingUrls = new Set<string>();
  /** The slots of a URL not in `slotsByUrl`. */
  private readonly firstSlots: number;
  /** Deliveries claimed ahead, per URL, in claim order. */
  private readonly queued = new Map<string, ClaimedDelivery[]>();
  private queuedCount = 0;
  /** Claimed ahead and waited too long: their leases are renewed before they are sent. */
  private stale: ClaimedDelivery[] = [];
  /** Attempts made and not yet recorded. */
  private readonly finished: FinishedAttempt[] = [];
  private recording: Promise<void> | null = null;
  /** The next record: waiting for its batch to gather (a timer) or for the next turn of the event loop. */
  private recordTimer: { readonly gathering: NodeJS.Timeout } | { readonly immediate: NodeJS.Immediate } | null = null;
  /** performance.now() when the oldest attempt not yet recorded finished. */
  private oldestFinishedAt = 0;
  /** The renewal of stale leases under way. */
  private renewing: Promise<void> | null = null;
  /** Claimed and neither recorded nor dropped. */
  private held = 0;
  /** Opened webhook secrets by project, with the stored (sealed) form they were opened from. */
  private readonly secrets = new Map<string, { readonly sealed: string; readonly opened: string }>();
  /** The SECRET_GENERATION in force, the SECRET_READ_AT of its read, and performance.now() of the last look. */
  private secretGeneration: string | null = null;
  private secretReadAt = 0n;
  private secretLookAt = -Infinity;

  private running: Promise<void> | null = null;
  private stopping = false;
  /** Ends the loop's wait; `wanted`: something asked for a round while one was running. */
  private wakeUp: (() => void) | null = null;
  private wanted = false;
  /** performance.now() of the last claim that looked past every URL in hand. */
  private lastWideClaim = -Infinity;
  /** Where the next look past the earliest due rows starts in the URLs' order (it goes round them, a part per claim). */
  private scanFrom = '';
  /** URLs whose project's secret this dispatcher could not open, left out of its claims until the time given (performance.now()). */
  private readonly unsignableUrls = new Map<string, number>();
  /** Called whenever something moved (drain waits on it). */
  private readonly watchers = new Set<() => void>();

  constructor(
    private readonly pool: Pool,
    private readonly registry: Registry,
    private readonly clock: Clock,
    private readonly options: DispatcherOptions,
  ) {
    this.perUrl = Math.max(1, options.perUrlConcurrency ?? Math.floor(options.concurrency / 4));
    this.prefetchPerUrl = Math.max(0, options.prefetchPerUrl ?? 16 * this.perUrl);
    this.firstSlots = options.slowStart === false ? this.perUrl : 1;
    this.maxClaimed = options.concurrency + (this.prefetchPerUrl > 0 ? 4 * options.concurrency : 0);
    this.maxHeld = this.maxClaimed + 4 * options.concurrency;
    this.leaseMs = (options.leaseSeconds ?? WEBHOOK_LEASE_SECONDS) * 1000;
    this.timeoutMs = options.timeoutMs ?? WEBHOOK_REPLY_TIMEOUT_MS;
    this.recordBatch = Math.max(1, options.recordBatch ?? 500);
    this.recordGatherMs = Math.max(0, options.recordGatherMs ?? RECORD_GATHER_MS);
    this.ownClient = options.client === undefined;
    this.client = options.client ?? new WebhookHttpClient({ allowPrivateNetworks: options.allowPrivateNetworks, timeoutMs: this.timeoutMs });
  }

  /** Called with an error of the dispatcher's own work: a claim, a renewal or a batch of attempts that could not be recorded (their leases run out and they are made again). */
  onError?: (error: Error) => void;
  /** Called after each round of the dispatcher's own loop in which a query of its own was answered (the database reached). */
  onRound?: () => void;
  /**
   * Whether a query of the dispatcher's own work was answered since the loop last looked: a round that did not throw
   * may have asked nothing (no room to claim) or swallowed its failures (renewals, give-backs), which says nothing.
   */
  private answered = false;

  /**
   * One round: renews the leases of deliveries that waited too long, claims as many
   * due deliveries as there is room for and starts those whose URL has a free slot;
   * does not wait for the attempts (a slow receiver holds its slots, not the
   * dispatcher). No URL gets more than `perUrlConcurrency` attempts at once, nor more
   * than that plus `prefetchPerUrl` claimed: 100 deliveries to a receiver that never
   * answers would otherwise take every slot for 10 s at a time, and every other
   * project's webhooks would wait behind them. Answers the number claimed.
   */
  async tick(): Promise<number> {
    await this.followSecretRotations();
    await this.renewStale();
    return this.claim();
  }

  /**
   * Looks, at most every SECRET_LOOK_MS, whether a project's webhook secret was rotated
   * since the deliveries claimed ahead read theirs (webhook_secret_changes, counted by a
   * trigger): those wait for their renewal, which reads the secret again, so an attempt
   * started from then on is signed with the new one (not with the one read at the claim,
   * which a slow receiver's queue could keep for minutes).
   */
  private async followSecretRotations(): Promise<void> {
    const now = performance.now();
    // Nothing waits with a secret read earlier: what is claimed next reads its own.
    if (now - this.secretLookAt < SECRET_LOOK_MS || this.queuedCount === 0) return;
    this.secretLookAt = now;
    const r = await this.pool.query<{ generation: string; read_at: string }>(`SELECT ${SECRET_GENERATION} AS generation, ${SECRET_READ_AT} AS read_at`);
    this.answered = true;
    this.noteSecretGeneration(r.rows[0]!.generation, r.rows[0]!.read_at);
  }

  /**
   * A value of SECRET_GENERATION read at `readAt` (SECRET_READ_AT): on the server in force,
   * the one of the later snapshot is in force (a read answered late that was made before a
   * rotation, or before a counter was set back, is not); of two equal snapshots, which a
   * transaction that was running at both may have committed between, the higher counter (a
   * rotation's). A counter set back is in force once read by a later snapshot: a renewal's
   * own write makes the next one later, so no delivery is renewed for good. Another server's
   * value (a database restored or failed over) is in force as it comes.
   */
  private noteSecretGeneration(generation: string, readAt: string): void {
    const at = BigInt(readAt);
    const current = this.secretGeneration;
    if (current !== null && serverOf(current) === serverOf(generation)) {
      if (at < this.secretReadAt || (at === this.secretReadAt && counterOf(generation) <= counterOf(current))) return;
    }
    this.secretGeneration = generation;
    this.secretReadAt = at;
  }

  /** Runs the dispatcher's own loop until `stop()`. */
  start(): void {
    if (this.running) return;
    this.stopping = false;
    this.running = this.loop();
  }

  /**
   * Stops claiming, gives the deliveries claimed ahead back (their leases dropped: due
   * at once for any dispatcher), waits for the attempts in flight and their records,
   * and closes the connections.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wakeUp?.();
    // What waits for its batch is recorded now.
    this.scheduleRecord();
    await this.running;
    this.running = null;
    // A renewal under way puts its deliveries back in the queues: given back with the others.
    while (this.renewing) await this.renewing.catch(() => undefined);
    await this.release();
    await this.drain();
    if (this.ownClient) await this.client.close();
  }

  /** Waits until every claimed delivery has been sent and recorded (or dropped). */
  async drain(): Promise<void> {
    while (this.held > 0) {
      if (this.stale.length > 0) await this.renewStale();
      if (this.held === 0) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, 50);
        const watchers = this.watchers;
        function done() {
          clearTimeout(timer);
          watchers.delete(done);
          resolve();
        }
        watchers.add(done);
      });
    }
  }

  private async loop(): Promise<void> {
    const interval = this.options.pollIntervalMs ?? 100;
    while (!this.stopping) {
      try {
        await this.tick();
        if (this.answered) this.onRound?.();
      } catch (error) {
        this.onError?.(error as Error);
      }
      this.answered = false;
      if (this.stopping) break;
      if (this.wanted) {
        this.wanted = false;
        continue;
      }
      // Until a URL or the whole dispatcher has room again (or new rows may be due).
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.wakeUp = null;
          resolve();
        }, interval);
        this.wakeUp = () => {
          clearTimeout(timer);
          this.wakeUp = null;
          resolve();
        };
      });
    }
  }

  /** Asks the loop (when started) for another round at once. */
  private wake(): void {
    if (this.wakeUp) this.wakeUp();
    else this.wanted = true;
  }

  private notify(): void {
    for (const watcher of [...this.watchers]) watcher();
  }

  private claimedOf(url: string): number {
    return (this.inFlightByUrl.get(url) ?? 0) + (this.queued.get(url)?.length ?? 0);
  }

  /** Attempts a URL may have in flight now. */
  private slotsOf(url: string): number {
    // What it holds waiting beyond a cold URL's allowance goes back (once the caller's loop is done).
    if (this.forgetIfIdle(url) && this.queued.has(url)) queueMicrotask(() => this.giveBackBeyondAllowance(url));
    return this.slotsByUrl.get(url)?.slots ?? this.firstSlots;
  }

  /** Forgets the slots of an idle URL, so a receiver that answered before and hangs now meets slow start too; true if it did. */
  private forgetIfIdle(url: string): boolean {
    const known = this.slotsByUrl.get(url);
    if (known === undefined || !this.idle(url, known.answeredAt, performance.now())) return false;
    this.slotsByUrl.delete(url);
    this.dryUrls.delete(url);
    return true;
  }

  /**
   * No answer for SLOW_START_IDLE_MS before `at`, and no attempt in flight (deliveries
   * waiting in its queue do not make a URL that stopped answering a live one).
   */
  private idle(url: string, answeredAt: number, at: number): boolean {
    return at - answeredAt > SLOW_START_IDLE_MS && !this.inFlightByUrl.has(url);
  }

  /**
   * What a URL with `slots` may hold claimed: at all its slots, `prefetchPerUrl` ahead of
   * them; below, as many ahead as it has slots (a URL that does not answer holds two, so
   * many such URLs cannot fill what the dispatcher may hold).
   */
  private allowance(slots: number): number {
    if (this.prefetchPerUrl === 0) return slots;
    return slots < this.perUrl ? 2 * slots : slots + this.prefetchPerUrl;
  }

  /**
   * A URL down to this many claimed wakes the loop for its next claim: at all its slots,
   * once half of what it may hold ahead went out, each claim takes that much, and the
   * other half covers the claim's round trip (decision 0094: with a quarter left, a busy
   * URL ran dry while its refill was under way); below, when it gains a slot.
   */
  private refillAtOf(url: string): number {
    const slots = this.slotsOf(url);
    if (this.prefetchPerUrl === 0) return slots - 1;
    return slots < this.perUrl ? slots : slots + Math.floor(this.prefetchPerUrl / 2);
  }

  /** Claims due deliveries into the queues and starts what may start. */
  private async claim(): Promise<number> {
    // Free slots always make room, whatever is claimed ahead (receivers that hang fill
    // their own queues, not everybody's room); claims ahead share 4 × concurrency.
    const room = Math.min(
      this.options.concurrency - this.inFlight + Math.max(0, this.maxClaimed - this.options.concurrency - this.queuedCount),
      this.maxHeld - this.held,
    );
    if (room <= 0 || this.stopping) return 0;
    // The claim caps every URL at one allowance, a URL's with one slot (as every URL it is
    // not told about): a URL with more slots (in hand, or one that answered within the idle
    // time) counts as holding that much less.
    const perUrl = this.allowance(this.firstSlots);
    const inHand = [...new Set([...this.inFlightByUrl.keys(), ...this.queued.keys()])];
    const busy = new Map<string, number>();
    for (const url of inHand) busy.set(url, this.claimedOf(url) - this.allowance(this.slotsOf(url)) + perUrl);
    const leasedAt = performance.now();
    // The earliest due rows, the URLs already at their limit left out (so a stuck URL's
    // backlog does not hide the others'), then at most what each URL has left. A URL
    // being refilled is below its limit, and its own backlog may fill the rows looked
    // at: at least every poll interval, a claim leaves out every URL already in hand
    // and looks past their backlogs for the others' webhooks (CLAIM_DUE_DELIVERIES says how).
    const wide = leasedAt - this.lastWideClaim >= (this.options.pollIntervalMs ?? 100);
    if (wide) this.lastWideClaim = leasedAt;
    if (wide)
      for (const url of this.dryUrls) {
        const slots = this.slotsOf(url);
        if (slots > this.firstSlots && !busy.has(url)) busy.set(url, perUrl - this.allowance(slots));
        else this.dryUrls.delete(url);
      }
    for (const [url, until] of this.unsignableUrls) if (until <= leasedAt) this.unsignableUrls.delete(url);
    const excluded = [...(wide ? inHand : inHand.filter((url) => busy.get(url)! >= perUrl)), ...this.unsignableUrls.keys()];
    const claimed = await this.pool.query<ClaimedRow & { scanned_to?: string | null }>(
      preparedStatement(wide ? CLAIM_LOOKING_BEHIND : CLAIM_EARLIEST, [
        this.clock.now(),
        room,
        this.leaseMs / 1000,
        excluded,
        perUrl,
        // How many of the earliest due rows the claim looks at: room for every slot, and for one URL's whole allowance.
        room + this.allowance(this.perUrl),
        [...busy.keys()],
        [...busy.values()],
        ...(wide
          ? // Where the look behind starts, and how many URLs it visits at most: those left out and enough for the room.
            [this.scanFrom, excluded.length + Math.max(room, URLS_VISITED_AT_LEAST)]
          : []),
      ]),
    );
    this.answered = true;
    if (wide) this.scanFrom = claimed.rows[0]?.scanned_to ?? this.scanFrom;
    const rows = claimed.rows.filter((row) => row.id !== null);
    // Built field by field (one shape for all; a rest-and-spread copy per row cost more than the rest of the claim's handling).
    const deliveries = rows.map((row): ClaimedDelivery => ({
      id: row.id,
      event_id: row.event_id,
      event_type: row.event_type,
      project_id: row.project_id,
      url: row.url,
      body: row.body,
      is_test: row.is_test,
      lease_token: row.lease_token,
      attempts_made: row.attempts_made,
      schedule_base: row.schedule_base,
      webhook_secret: row.webhook_secret,
      secret_generation: row.secret_generation,
      secret_read_at: row.secret_read_at,
      leasedAt,
      fresh: true,
    }));
    if (deliveries.length > 0) this.noteSecretGeneration(deliveries[0]!.secret_generation, deliveries[0]!.secret_read_at);
    const brought = new Set(deliveries.map((d) => d.url));
    for (const url of brought) {
      // Idle when the claim began and not in hand: it was claimed for as a URL of one slot, and has one.
      const known = this.slotsByUrl.get(url);
      if (known !== undefined && !busy.has(url) && this.idle(url, known.answeredAt, leasedAt)) this.slotsByUrl.delete(url);
      this.dryUrls.delete(url);
    }
    for (const d of deliveries) this.enqueue(d);
    this.held += deliveries.length;
    // Each URL keeps only its allowance: its slots may have fallen while the claim was under way (an attempt without
    // an answer, or idle), or what it had set aside for a renewal was not counted.
    for (const url of brought) this.giveBackBeyondAllowance(url);
    this.startQueued();
    for (const d of deliveries) d.fresh = false;
    // The URLs this claim left out that want a refill: the next round at once.
    if (wide && inHand.some((url) => this.claimedOf(url) <= this.refillAtOf(url))) this.wanted = true;
    return deliveries.length;
  }

  private enqueue(d: ClaimedDelivery, first = false): void {
    const list = this.queued.get(d.url);
    if (!list) this.queued.set(d.url, [d]);
    else if (first) list.unshift(d);
    else list.push(d);
    this.queuedCount++;
  }

  /** Starts queued deliveries while there are free slots (overall and for their URL). */
  private startQueued(): void {
    for (const [url, list] of this.queued) {
      if (this.inFlight >= this.options.concurrency) return;
      // Gone idle: trimmed at once, before any of its queue is set aside for a lease renewal.
      if (this.forgetIfIdle(url)) this.giveBackBeyondAllowance(url);
      const slots = this.slotsOf(url);
      while (list.length > 0 && this.inFlight < this.options.concurrency && (this.inFlightByUrl.get(url) ?? 0) < slots) {
        const d = list.shift()!;
        this.queuedCount--;
        // Its lease must still cover a whole attempt: renewed first when it waited too long,
        // or when a secret was rotated since it read its own (the renewal reads it again).
        const rotated = d.secret_generation !== this.secretGeneration;
        if (rotated || (!d.fresh && performance.now() - d.leasedAt > this.leaseMs - this.timeoutMs - LEASE_MARGIN_MS)) {
          this.stale.push(d);
          void this.renewStale();
          continue;
        }
        this.send(d);
      }
      if (list.length === 0) this.queued.delete(url);
    }
  }

  /**
   * Renews the leases of the deliveries that waited too long (or whose project's secret may
   * have been rotated: read again here); those whose token was replaced meanwhile are dropped unsent.
   */
  private renewStale(): Promise<void> {
    if (!this.renewing && this.stale.length > 0) this.renewing = this.renew().finally(() => (this.renewing = null));
    return this.renewing ?? Promise.resolve();
  }

  private async renew(): Promise<void> {
    const stale = this.stale;
    this.stale = [];
    for (const d of stale) this.renewingUrls.add(d.url);
    const leasedAt = performance.now();
    let renewed: Map<string, { webhook_secret: string | null; secret_generation: string; secret_read_at: string }>;
    try {
      const r = await this.pool.query<{ id: string; webhook_secret: string | null; secret_generation: string; secret_read_at: string }>(
        `WITH renewed AS (
           UPDATE webhook_queue q SET leased_until = clock_timestamp() + make_interval(secs => $3)
           FROM unnest($1::uuid[], $2::uuid[], $4::uuid[]) AS s(id, lease_token, project_id)
           WHERE q.id = s.id AND q.lease_token = s.lease_token
           RETURNING q.id, s.project_id)
         SELECT r.id, (SELECT p.webhook_secret FROM projects p WHERE p.id = r.project_id) AS webhook_secret,
                ${SECRET_GENERATION} AS secret_generation, ${SECRET_READ_AT} AS secret_read_at
         FROM renewed r`,
        [stale.map((d) => d.id), stale.map((d) => d.lease_token), this.leaseMs / 1000, stale.map((d) => d.project_id)],
      );
      renewed = new Map(r.rows.map((row) => [row.id, row]));
      this.answered = true;
    } catch (error) {
      // Not renewed: dropped unsent (the lease runs out and any dispatcher claims it again).
      this.onError?.(error as Error);
      renewed = new Map();
    }
    for (const row of renewed.values()) this.noteSecretGeneration(row.secret_generation, row.secret_read_at);
    for (const d of stale.reverse()) {
      const row = renewed.get(d.id);
      if (row)
        this.enqueue(
          { ...d, webhook_secret: row.webhook_secret, secret_generation: row.secret_generation, secret_read_at: row.secret_read_at, leasedAt, fresh: true },
          true,
        );
      else this.held--;
    }
    this.renewingUrls.clear();
    // A URL whose slots fell meanwhile keeps only its allowance.
    for (const url of new Set(stale.map((d) => d.url))) this.giveBackBeyondAllowance(url);
    this.startQueued();
    for (const list of this.queued.values()) for (const d of list) d.fresh = false;
    this.notify();
    // Those that went stale meanwhile.
    if (this.stale.length > 0) setImmediate(() => void this.renewStale());
  }

  /** Gives the deliveries claimed ahead back: their leases dropped, due at once for any dispatcher. */
  private async release(): Promise<void> {
    const unsent = [...[...this.queued.values()].flat(), ...this.stale];
    this.queued.clear();
    this.queuedCount = 0;
    this.stale = [];
    await this.giveBack(unsent);
  }

  private async giveBack(unsent: readonly ClaimedDelivery[]): Promise<void> {
    if (unsent.length === 0) return;
    try {
      await this.pool.query(
        `UPDATE webhook_queue q SET leased_until = NULL, lease_token = NULL
         FROM unnest($1::uuid[], $2::uuid[]) AS s(id, lease_token)
         WHERE q.id = s.id AND q.lease_token = s.lease_token`,
        [unsent.map((d) => d.id), unsent.map((d) => d.lease_token)],
      );
      this.answered = true;
    } catch (error) {
      this.onError?.(error as Error);
    }
    this.held -= unsent.length;
    this.notify();
  }

  private secretOf(d: ClaimedDelivery): string | null {
    if (d.webhook_secret === null) return null;
    const known = this.secrets.get(d.project_id);
    // A secret rotated since it was opened is stored differently: opened again.
    if (known !== undefined && known.sealed === d.webhook_secret) return known.opened;
    if (known === undefined && this.secrets.size >= 1000) this.secrets.clear();
    const opened = this.registry.openWebhookSecret(d.project_id, d.webhook_secret);
    this.secrets.set(d.project_id, { sealed: d.webhook_secret, opened });
    return opened;
  }

  /** One attempt: signed and posted; its outcome joins the next batch to record. */
  private send(d: ClaimedDelivery): void {
    this.inFlight++;
    this.inFlightByUrl.set(d.url, (this.inFlightByUrl.get(d.url) ?? 0) + 1);
    const at = this.clock.now();
    const unixSeconds = Math.floor(at.getTime() / 1000);
    let attempt: Promise<AttemptResult>;
    let posted = false;
    try {
      const secret = this.secretOf(d);
      posted = secret !== null;
      attempt =
        secret === null
          ? Promise.resolve({ statusCode: null, body: null, durationMs: 0, error: 'the project no longer exists' })
          : this.client.post(d.url, d.body, {
              'x-service-signature': webhookSignature(d.body, secret),
              'x-service-timestamp': String(unixSeconds),
              'x-service-event': d.event_type,
              'x-service-delivery-id': d.id,
              'x-service-test': String(d.is_test),
              [TIMESTAMPED_SIGNATURE_HEADER]: webhookTimestampedSignature(d.body, secret, unixSeconds),
              // Standard Webhooks (standardwebhooks.com), beside the spec's headers.
              'webhook-id': d.event_id,
              'webhook-timestamp': String(unixSeconds),
              'webhook-signature': standardWebhookSignature(d.event_id, unixSeconds, d.body, secret),
            });
    } catch (error) {
      if (error instanceof UnopenableWebhookSecretError) return this.notSignable(d, error);
      attempt = Promise.reject(error as Error);
    }
    void attempt
      .catch((error: Error): AttemptResult => ({ statusCode: null, body: null, durationMs: 0, error: error.message }))
      .then((result) => {
        this.leftFlight(d.url);
        const widened = posted && this.adjustSlots(d.url, result.statusCode !== null);
        if (posted && result.statusCode === null) this.giveBackBeyondAllowance(d.url);
        if (this.finished.length === 0) this.oldestFinishedAt = performance.now();
        this.finished.push({ delivery: d, at, endedAt: this.clock.now(), result });
        this.scheduleRecord();
        this.startQueued();
        const claimed = this.claimedOf(d.url);
        if (claimed === 0 && this.slotsOf(d.url) > this.firstSlots && !this.renewingUrls.has(d.url) && !this.stale.some((x) => x.url === d.url)) {
          this.dryUrls.delete(d.url);
          this.dryUrls.add(d.url);
          if (this.dryUrls.size > DRY_URLS_KEPT) this.dryUrls.delete(this.dryUrls.values().next().value!);
        }
        // A claim when this URL has room for a batch again (or a slot more while it has a
        // backlog), or everybody has (not at every answer: a claim while the URL is at its
        // limit would only scan its backlog).
        if (
          claimed === this.refillAtOf(d.url) ||
          (widened && claimed > 0 && claimed < this.allowance(this.slotsOf(d.url))) ||
          this.inFlight === this.options.concurrency - 1 ||
          this.inFlight + this.queuedCount === Math.floor(this.maxClaimed / 4)
        )
          this.wake();
      });
  }

  /**
   * A delivery this process cannot sign: its project's secret does not open with this
   * process's key (a key file left stale by a key rotation, a sealed value altered). The
   * gateway's fault, not the endpoint's: nothing is sent and no attempt recorded, so the
   * merchant's retry schedule and the endpoint's health are not charged. It is given back
   * at once, for a process that can open the secret (this one once the key is right).
   */
  private notSignable(d: ClaimedDelivery, error: Error): void {
    this.leftFlight(d.url);
    // Its URL is left out of this dispatcher's claims for as long as a lease, and the delivery given back at once: another
    // dispatcher (one that can open the secret) sends it without waiting for a lease this one would only renew.
    if (this.unsignableUrls.size >= 1000) this.unsignableUrls.clear();
    this.unsignableUrls.set(d.url, performance.now() + UNSIGNABLE_URL_LEFT_OUT_MS);
    void this.giveBack([d]);
    this.onError?.(error);
    // Not from here: the next of a batch of such deliveries would come back here, one stack frame deeper each.
    setImmediate(() => this.startQueued());
  }

  /** An attempt of `url` no longer in flight. */
  private leftFlight(url: string): void {
    this.inFlight--;
    const left = (this.inFlightByUrl.get(url) ?? 1) - 1;
    if (left > 0) this.inFlightByUrl.set(url, left);
    else this.inFlightByUrl.delete(url);
  }

  /** Deliveries of a URL back to one slot beyond what it may now hold: given back, the latest first. */
  private giveBackBeyondAllowance(url: string): void {
    const list = this.queued.get(url);
    const keep = Math.max(0, this.allowance(this.slotsOf(url)) - (this.inFlightByUrl.get(url) ?? 0));
    if (!list || list.length <= keep) return;
    const excess = list.splice(keep);
    this.queuedCount -= excess.length;
    if (list.length === 0) this.queued.delete(url);
    // Less held: a claim may have room again.
    void this.giveBack(excess).then(() => this.wake());
  }

  /** One more slot for a URL that answered (up to `perUrl`; true when it got one), one only for a URL that did not. */
  private adjustSlots(url: string, answered: boolean): boolean {
    if (this.options.slowStart === false) return false;
    if (!answered) {
      this.slotsByUrl.delete(url);
      return false;
    }
    // Its attempt was in flight until now: not idle, whenever it answered before.
    const slots = this.slotsByUrl.get(url)?.slots ?? this.firstSlots;
    if (!this.slotsByUrl.has(url) && this.slotsByUrl.size >= MAX_URLS_WITH_SLOTS) {
      // The idle ones go first (they start from one slot anyway), then everything.
      const idleBefore = performance.now() - SLOW_START_IDLE_MS;
      for (const [known, { answeredAt }] of this.slotsByUrl) if (answeredAt < idleBefore && this.claimedOf(known) === 0) this.slotsByUrl.delete(known);
      if (this.slotsByUrl.size >= MAX_URLS_WITH_SLOTS) this.slotsByUrl.clear();
    }
    this.slotsByUrl.set(url, { slots: Math.min(this.perUrl, slots + 1), answeredAt: performance.now() });
    return slots < this.perUrl;
  }

  /**
   * Records soon: every attempt that finishes in this turn of the event loop joins the
   * same batch, and so does every one that finishes within `recordGatherMs` of the
   * batch's oldest (unless the batch is full or the dispatcher is stopping).
   */
  private scheduleRecord(): void {
    if (this.recording || this.finished.length === 0) return;
    const full = this.finished.length >= this.recordBatch || this.stopping;
    const wait = full ? 0 : this.recordGatherMs - (performance.now() - this.oldestFinishedAt);
    if (this.recordTimer !== null) {
      if (wait > 0 || 'immediate' in this.recordTimer) return;
      clearTimeout(this.recordTimer.gathering);
    }
    const recordNow = () => {
      this.recordTimer = null;
      this.recordFinished();
    };
    this.recordTimer = wait > 0 ? { gathering: setTimeout(recordNow, Math.ceil(wait)) } : { immediate: setImmediate(recordNow) };
  }

  /** Records the finished attempts in batches, one transaction at a time (those that finish meanwhile make the next batch). */
  private recordFinished(): void {
    if (this.recording || this.finished.length === 0) return;
    const batch = this.finished.splice(0, this.recordBatch);
    this.recording = this.record(batch)
      .then(
        (outcomes) => {
          this.answered = true;
          outcomes.forEach((o) => this.options.onAttempt?.(o));
        },
        (error: Error) => this.onError?.(error),
      )
      .finally(() => {
        // Claims waited for these records: room again.
        if (this.held >= this.maxHeld) this.wake();
        this.held -= batch.length;
        this.recording = null;
        this.scheduleRecord();
        this.notify();
      });
  }

  /**
   * Records a batch of attempts in one statement (one round trip, one transaction)
   * and, for each whose delivery still carries its claim's lease token, its outcome.
   * The statement locks the batch's delivery records first, in id order (two
   * dispatchers' batches cannot deadlock), and numbers the attempts of each after its
   * `attempts_recorded`, read under that lock. Then each queue row that still carries an
   * attempt's token (judged on the row as it is once the delete or update has it
   * locked) leaves the queue when the attempt delivered it or failed it for good, or is
   * rescheduled with its lease dropped; those attempts are "ours" and move the record
   * (status, attempts made, next attempt: columns no index of the history covers, so
   * a heap-only update). Each outcome was decided beforehand by `attemptOutcome` from
   * the attempts made and the schedule's base that the claim read: both change only
   * together with the lease token (an outcome recorded or a resend drops it), so while
   * the token is the claim's they are still what the claim read. Answers each attempt's
   * outcome, in the batch's order; a delivery deleted meanwhile (retention) gets no
   * history, and its attempt counts as superseded.
   */
  private async record(batch: readonly FinishedAttempt[]): Promise<WebhookAttemptOutcome[]> {
    const decided = batch.map((f) => attemptOutcome(f.result.statusCode, f.delivery.attempts_made + 1, f.delivery.schedule_base, f.endedAt));
    const judged = await this.pool.query<{ ord: string; ours: boolean }>(
      preparedStatement(
        `WITH attempt AS MATERIALIZED (
           SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::int[], $5::text[], $6::int[], $7::text[], $8::int[], $9::text[], $10::timestamptz[])
             WITH ORDINALITY AS a(delivery_id, lease_token, at, status_code, body, duration_ms, error, attempts_made, status, next, ord)),
         locked AS MATERIALIZED (
           SELECT d.id, d.attempts_recorded FROM webhook_deliveries d
           WHERE d.id IN (SELECT delivery_id FROM attempt)
           ORDER BY d.id FOR NO KEY UPDATE),
         finished AS (
           DELETE FROM webhook_queue q USING attempt a
           WHERE q.id = a.delivery_id AND q.lease_token = a.lease_token AND a.status <> 'pending'
             -- every record locked (in id order) before any queue row is
             AND a.delivery_id = ANY (ARRAY(SELECT id FROM locked))
           RETURNING q.id, q.lease_token),
         retried AS (
           UPDATE webhook_queue q
           SET next_attempt_at = a.next, attempts_made = a.attempts_made, leased_until = NULL, lease_token = NULL
           FROM attempt a
           WHERE q.id = a.delivery_id AND q.lease_token = a.lease_token AND a.status = 'pending'
             AND a.delivery_id = ANY (ARRAY(SELECT id FROM locked))
           RETURNING q.id, a.lease_token),
         judged AS MATERIALIZED (
           SELECT a.*, o.id IS NOT NULL AS ours,
                  l.attempts_recorded + row_number() OVER (PARTITION BY a.delivery_id ORDER BY a.ord) AS number
           FROM attempt a JOIN locked l ON l.id = a.delivery_id
           LEFT JOIN (SELECT id, lease_token FROM finished UNION ALL SELECT id, lease_token FROM retried) AS o
             ON o.id = a.delivery_id AND o.lease_token = a.lease_token),
         moved AS (
           UPDATE webhook_deliveries d
           SET attempts_recorded = d.attempts_recorded + j.recorded,
               acknowledged = d.acknowledged OR j.acknowledged,
               attempts_made = coalesce(j.attempts_made, d.attempts_made),
               status = coalesce(j.status, d.status),
               next_attempt_at = CASE WHEN j.attempts_made IS NULL THEN d.next_attempt_at ELSE j.next END
           FROM (SELECT delivery_id, count(*) AS recorded,
                        -- Any attempt acknowledged, ours or superseded: the receiver has the event.
                        coalesce(bool_or(status_code BETWEEN 200 AND 299), false) AS acknowledged,
                        -- At most one attempt of a delivery holds its current lease.
                        max(attempts_made) FILTER (WHERE ours) AS attempts_made,
                        max(status) FILTER (WHERE ours) AS status,
                        max(next) FILTER (WHERE ours) AS next
                 FROM judged GROUP BY delivery_id) AS j
           WHERE d.id = j.delivery_id),
         history AS (
           INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, body, duration_ms, error, superseded)
           SELECT delivery_id, number, at, status_code, body, duration_ms, error, NOT ours FROM judged)
         SELECT ord, ours FROM judged`,
        [
          batch.map((f) => f.delivery.id),
          batch.map((f) => f.delivery.lease_token),
          batch.map((f) => f.at),
          batch.map((f) => f.result.statusCode),
          batch.map((f) => (f.result.body === null ? null : stripUnstorable(f.result.body))),
          batch.map((f) => f.result.durationMs),
          batch.map((f) => f.result.error),
          batch.map((f) => f.delivery.attempts_made + 1),
          decided.map((o) => o.status),
          decided.map((o) => o.nextAttemptAt),
        ],
      ),
    );
    const ours = new Set(judged.rows.filter((r) => r.ours).map((r) => Number(r.ord) - 1));
    return decided.map((o, i): WebhookAttemptOutcome => (!ours.has(i) ? 'superseded' : o.status === 'pending' ? 'retry' : o.status));
  }
}

/**
 * The operator's resend refused: the project's endpoint is disabled (3 days failing),
 * its deliveries are not sent; re-enabling it sends again what it is owed.
 */
export const endpointDisabled = (projectId: string, noUrl = false): Refusal<'conflict'> =>
  new Refusal(
    'conflict',
    noUrl
      ? 'У проекта нет адреса вебхуков (мерчант отписался): отправлять некуда; задайте webhookUrl (PATCH проекта), и повтор отправит на него'
      : `Адрес вебхуков проекта отключён после 3 дней отказов, и доставки на него не отправляются. Включите его (POST /admin/v1/projects/${projectId}/webhook-endpoint/enable или «Включить и отправить долг» в консоли): это отправит снова всё, что ему задолжали`,
  );

/**
 * A resend's deliveries (the CTE `delivery`, addressed to the project's URL now: one the merchant left, whose
 * domain may have changed hands since, gets no resent customer data) put back in the queue with a fresh schedule
 * and no lease.
 */
const QUEUE_AGAIN = `INSERT INTO webhook_queue (id, seq, url, next_attempt_at, attempts_made, schedule_base)
  SELECT id, seq, url, next_attempt_at, attempts_made, attempts_made FROM delivery
  ON CONFLICT (id) DO UPDATE
  SET url = excluded.url, next_attempt_at = excluded.next_attempt_at, attempts_made = excluded.attempts_made, schedule_base = excluded.schedule_base,
      leased_until = NULL, lease_token = NULL`;

/**
 * A resend's SET of `addressed_at` ($2, the resend's time) when it sends a delivery to another URL than its attempts
 * went to: endpoint health counts only its attempts since, so the new URL's streak does not start with the old one's.
 */
const READDRESSED_AT = `addressed_at = CASE WHEN url IS DISTINCT FROM (SELECT webhook_url FROM project) THEN $2::timestamptz ELSE addressed_at END`;

/**
 * The operator's resend: the delivery is due again now with a fresh retry schedule
 * (same id and body): back in the queue, or its queue row made due now. Its lease
 * token is dropped, so an attempt started before the resend cannot overwrite what the
 * resent attempts decide. The project is locked for share first (the endpoint-health
 * worker's disabling waits, or is seen), then the record (as a batch of records locks
 * it), so the attempts counted are read after any record under way. Null when there
 * is no such delivery; refused (conflict) while the project's endpoint is disabled.
 */
export async function resendDelivery(
  pool: Pick<Pool, 'connect' | 'query'> | PoolClient,
  id: string,
  now: Date,
): Promise<{ id: string; nextAttemptAt: Date } | null> {
  const updated = await writeStatement<{
    id: string | null;
    next_attempt_at: Date | null;
    project_id: string | null;
    disabled: boolean | null;
    no_url: boolean | null;
  }>(
    pool,
    `WITH project AS (
       SELECT p.id, p.webhook_disabled_at IS NOT NULL OR p.webhook_url IS NULL AS disabled, p.webhook_url IS NULL AS no_url, p.webhook_url FROM projects p
       WHERE p.id = (SELECT project_id FROM webhook_deliveries WHERE id = $1) FOR SHARE),
     delivery AS (
       UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2, url = (SELECT webhook_url FROM project), ${READDRESSED_AT}
       WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM project WHERE disabled) RETURNING id, seq, url, attempts_made, next_attempt_at),
     queued AS (
       ${QUEUE_AGAIN} RETURNING id, next_attempt_at)
     SELECT (SELECT id FROM queued) AS id, (SELECT next_attempt_at FROM queued) AS next_attempt_at,
            (SELECT id FROM project) AS project_id, (SELECT disabled FROM project) AS disabled, (SELECT no_url FROM project) AS no_url`,
    [id, now],
  );
  const row = updated.rows[0]!;
  if (row.disabled && row.project_id) throw endpointDisabled(row.project_id, row.no_url === true);
  return row.id && row.next_attempt_at ? { id: row.id, nextAttemptAt: row.next_attempt_at } : null;
}

/** The most failed deliveries one statement of resendFailedDeliveries resends. */
export const RESEND_BATCH = 5_000;

interface ResendBatchRow {
  found: number;
  disabled: boolean;
  /** The project has no webhook URL now: a resend has nowhere to go (not even the URL the merchant left). */
  no_url: boolean;
  /** Failed deliveries the statement took (at most the batch), and the last of them by seq. */
  taken: number;
  last: string | null;
  resent: number;
}

/**
 * The operator's resend of every `failed` delivery of one project (after its receiver
 * was fixed): each as `resendDelivery` does it, the project locked for share first, then
 * the records in id order as a batch of records locks them, at most `batch` a
 * transaction, taken in seq order through the project's index (all batches read the
 * project's deliveries once). A month of failures is millions: one statement of them all
 * passed the statement timeout (the endpoint could never be enabled), and one transaction
 * of them all would hide every event appended meanwhile from every subscriber of the
 * cluster until it ended. `first` runs in the first batch's transaction (the endpoint
 * enabled with it). A failure before that commits: nothing was written; after it, a
 * ResendCutShortError (the marked 503: done in part), and a repeat resends the rest. The
 * number resent, or null when there is no such project; refused (conflict) while the
 * project's endpoint is disabled (re-enabling it resends them), also when a later batch
 * finds it disabled: the health check that disabled it stopped what was resent with it.
 */
export async function resendFailedDeliveries(
  pool: Pool,
  projectId: string,
  now: Date,
  options: { readonly batch?: number; readonly first?: (tx: PoolClient) => Promise<void> } = {},
): Promise<number | null> {
  const batch = options.batch ?? RESEND_BATCH;
  let done = await inTransaction(pool, async (tx) => {
    await options.first?.(tx);
    return resendBatch(tx, projectId, now, '0', batch);
  });
  if (done === null) return null;
  let resent = done.resent;
  try {
    while (done !== null && done.taken === batch) {
      const after: string = done.last!;
      done = await inTransaction(pool, (tx) => resendBatch(tx, projectId, now, after, batch));
      resent += done?.resent ?? 0;
    }
  } catch (error) {
    if (error instanceof Refusal) throw error;
    throw new ResendCutShortError(resent, error);
  }
  return resent;
}

/** resendFailedDeliveries failed after its first batch committed: `resent` (or more, when the last commit's answer was lost) stay resent. */
export class ResendCutShortError extends Error {
  constructor(
    readonly resent: number,
    cause: unknown,
  ) {
    super(`the resend of failed deliveries was cut short after ${resent} of them: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'ResendCutShortError';
  }
}

/** One batch of resendFailedDeliveries: the failed deliveries after seq `after`; null for no such project. */
async function resendBatch(
  tx: PoolClient,
  projectId: string,
  now: Date,
  after: string,
  batch: number,
): Promise<{ readonly resent: number; readonly taken: number; readonly last: string | null } | null> {
  const result = await tx.query<ResendBatchRow>(
    `WITH project AS (
         SELECT id, webhook_disabled_at IS NOT NULL OR webhook_url IS NULL AS disabled, webhook_url IS NULL AS no_url, webhook_url FROM projects WHERE id = $1 FOR SHARE),
       batch AS (
         SELECT id, seq FROM webhook_deliveries
         WHERE project_id = $1 AND status = 'failed' AND seq > $3 AND NOT EXISTS (SELECT 1 FROM project WHERE disabled)
         ORDER BY seq LIMIT $4),
       failed AS (
         SELECT id FROM webhook_deliveries WHERE id IN (SELECT id FROM batch) ORDER BY id FOR NO KEY UPDATE),
       delivery AS (
         UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = $2, url = (SELECT webhook_url FROM project), ${READDRESSED_AT}
         FROM failed f WHERE d.id = f.id AND d.status = 'failed' RETURNING d.id, d.seq, d.url, d.attempts_made, d.next_attempt_at),
       queued AS (
         ${QUEUE_AGAIN} RETURNING 1)
       SELECT (SELECT count(*) FROM project)::int AS found, coalesce((SELECT disabled FROM project), false) AS disabled,
              coalesce((SELECT no_url FROM project), false) AS no_url,
              (SELECT count(*) FROM batch)::int AS taken, (SELECT max(seq) FROM batch)::text AS last,
              (SELECT count(*) FROM queued)::int AS resent`,
    [projectId, now, after, batch],
  );
  const row = result.rows[0]!;
  if (row.disabled) throw endpointDisabled(projectId, row.no_url);
  return row.found === 0 ? null : { resent: row.resent, taken: row.taken, last: row.last };
}

/** PostgreSQL text holds no NUL and no lone surrogate: a receiver's reply may have either. */
const stripUnstorable = (text: string): string =>
  // eslint-disable-next-line no-control-regex -- NUL cannot be stored in a PostgreSQL text column
  text.replace(/\u0000/g, '').replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
