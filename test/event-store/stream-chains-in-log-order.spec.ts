/**
 * The stream chain check fed the log in log order (StreamChainsInLogOrder, decision
 * 0123): on random logs of interleaved streams, untouched and tampered with in each way
 * the verification names (data edited, events deleted, data or whole events exchanged
 * within a stream, places in the log exchanged, stored hashes edited, a stream's first
 * events gone), it reports exactly what the stream-by-stream check (StreamChainCheck)
 * reports when fed the same events stream after stream in revision order, which is what
 * `log:verify` did before it read the log once. The same holds when each event is first
 * offered to `expects`, its digest taken over its texts' bytes and followed by `goesOn`
 * when it is its stored hash (the PostgreSQL read's path, decision 0140), and
 * the order check fed by the chain check's stream numbers (`eventInSlot`) finds what it
 * finds fed by names.
 */
import {
  CHAIN_HASH_BYTES,
  chainHashes,
  ContentBytesDigest,
  describeProblem,
  LogOrderCheck,
  LogProblem,
  StoredChainedEvent,
  StreamChainCheck,
  StreamChainsInLogOrder,
} from '#event-store';
import type { Random } from '../../apps/tools/src/seed/random';
import { intBelow, seededRandom } from '../support/test-seed';

type Tampering = 'data_edited' | 'deleted' | 'data_exchanged' | 'events_exchanged' | 'places_exchanged' | 'hash_edited' | 'head_gone';
const TAMPERINGS: readonly Tampering[] = ['data_edited', 'deleted', 'data_exchanged', 'events_exchanged', 'places_exchanged', 'hash_edited', 'head_gone'];

/** Streams of random lengths, chained as the stores chain them, interleaved at random in the log (each stream's revisions ascending). */
function randomLog(rng: Random, streams: number, maxLength: number): StoredChainedEvent[] {
  const pending = Array.from({ length: streams }, (_, s) => {
    const streamName = `${rng.chance(0.5) ? 'invoice' : 'ledger'}-${s}`;
    const contents = Array.from({ length: intBelow(rng, 1, maxLength + 1) }, (_, r) => ({
      streamName,
      revision: BigInt(r),
      id: rng.uuid(),
      type: rng.chance(0.5) ? 'InvoicePaid' : 'LedgerEntryPosted',
      dataJson: `{"n": ${intBelow(rng, 0, 1_000_000)}, "amount": "${intBelow(rng, 1, 10_000)}.00"}`,
      metadataJson: '{}',
    }));
    const hashes = chainHashes(null, contents);
    return contents.map((c, i) => ({ ...c, storedHash: hashes[i]! }));
  });
  const log: StoredChainedEvent[] = [];
  while (pending.some((p) => p.length > 0)) {
    const open = pending.filter((p) => p.length > 0);
    const next = open[intBelow(rng, 0, open.length)]!.shift()!;
    log.push({ ...next, position: `${1000 + log.length}/${1000 + log.length}` });
  }
  return log;
}

/** The log tampered with once, in the given way (the log is in log order; positions stay with their places). */
function tamper(rng: Random, log: StoredChainedEvent[], how: Tampering): StoredChainedEvent[] {
  const out = [...log];
  const pick = () => intBelow(rng, 0, out.length);
  const sameStream = (i: number) => out.map((e, j) => ({ e, j })).filter(({ e, j }) => j !== i && e.streamName === out[i]!.streamName);
  switch (how) {
    case 'data_edited': {
      const i = pick();
      out[i] = { ...out[i]!, dataJson: out[i]!.dataJson.replace('"n": ', '"n": 7') };
      return out;
    }
    case 'deleted':
      out.splice(pick(), 1);
      return out;
    case 'data_exchanged':
    case 'events_exchanged': {
      const i = pick();
      const others = sameStream(i);
      if (others.length === 0) return out;
      const j = others[intBelow(rng, 0, others.length)]!.j;
      const [a, b] = [out[i]!, out[j]!];
      if (how === 'data_exchanged') {
        out[i] = { ...a, dataJson: b.dataJson };
        out[j] = { ...b, dataJson: a.dataJson };
      } else {
        // Each event at the other's revision; the stored chain hashes stay at their revisions.
        out[i] = { ...b, revision: a.revision, position: a.position, storedHash: a.storedHash };
        out[j] = { ...a, revision: b.revision, position: b.position, storedHash: b.storedHash };
      }
      return out;
    }
    case 'places_exchanged': {
      // Two events exchange their places in the log (each keeps its stream and revision).
      const [i, j] = [pick(), pick()];
      const [a, b] = [out[i]!, out[j]!];
      out[i] = { ...b, position: a.position };
      out[j] = { ...a, position: b.position };
      return out;
    }
    case 'hash_edited': {
      const i = pick();
      const edited = Buffer.from(out[i]!.storedHash!);
      edited[0] = edited[0]! ^ 0xff;
      out[i] = { ...out[i]!, storedHash: edited };
      return out;
    }
    case 'head_gone': {
      const name = out[pick()]!.streamName;
      const cut = BigInt(intBelow(rng, 1, 4));
      return out.filter((e) => !(e.streamName === name && e.revision < cut));
    }
  }
}

const positionKey = (p: string | null) => (p === null ? [Infinity, Infinity] : p.split('/').map(Number));
const sorted = (problems: readonly LogProblem[]) =>
  [...problems].sort((x, y) => {
    const [a, b] = [positionKey(x.position), positionKey(y.position)];
    return a[0]! - b[0]! || a[1]! - b[1]! || describeProblem(x).localeCompare(describeProblem(y));
  });

function streamByStream(log: readonly StoredChainedEvent[]): LogProblem[] {
  const check = new StreamChainCheck();
  const inRevisionOrder = [...log].sort((a, b) => (a.streamName < b.streamName ? -1 : a.streamName > b.streamName ? 1 : Number(a.revision - b.revision)));
  for (const e of inRevisionOrder) check.event(e);
  check.finish();
  return sorted(check.problems);
}

function inLogOrder(log: readonly StoredChainedEvent[]): { problems: LogProblem[]; streams: number; events: number } {
  const check = new StreamChainsInLogOrder();
  for (const e of log) check.event(e);
  check.finish();
  return { problems: sorted(check.problems), streams: check.streams, events: check.events };
}

/**
 * The chain check as the PostgreSQL read of the log feeds it: each event offered to
 * `expects`, its digest taken over its texts as the UTF-8 bytes of a row
 * (ContentBytesDigest) and followed by `goesOn` when it is its stored hash, handed to
 * `event` when it does not simply go on its chain; and the order check fed by the slots
 * that gives. Answers what the
 * two checks found and each stream's followed head.
 */
function asTheLogReadFeedsIt(log: readonly StoredChainedEvent[]) {
  const chains = new StreamChainsInLogOrder();
  const order = new LogOrderCheck();
  const names: string[] = [];
  const hashes = Buffer.alloc(CHAIN_HASH_BYTES);
  const digest = new ContentBytesDigest({ streamName: 0, id: 1, type: 2, data: 3, metadata: 4 });
  for (const e of log) {
    const { storedHash } = e;
    const hashless = storedHash === null || storedHash.length !== CHAIN_HASH_BYTES;
    if (!hashless) storedHash.copy(hashes);
    // The event as the read of the log has it: its texts as the UTF-8 bytes of a row.
    const row = rowOf([e.streamName, e.id, e.type, e.dataJson, e.metadataJson]);
    let slot = hashless ? -1 : chains.expects(e.streamName, Number(e.revision));
    if (slot >= 0) {
      if (
        digest.digest(chains.previousHashes(slot), slot * CHAIN_HASH_BYTES, row.bytes, row.starts, row.ends, Number(e.revision)) === storedHash!.toString('hex')
      ) {
        chains.goesOn(slot, hashes, 0);
      } else slot = -1;
    }
    if (slot < 0) slot = chains.event(e);
    if (slot === names.length) names.push(e.streamName);
    order.eventInSlot(slot, names, Number(e.revision), e.position, hashless ? null : hashes, 0);
  }
  chains.finish();
  order.finish();
  return { chains, order, names };
}

function rowOf(texts: readonly string[]): { bytes: Buffer; starts: Int32Array; ends: Int32Array } {
  const parts = texts.map((text) => Buffer.from(text, 'utf8'));
  const starts = new Int32Array(parts.length);
  const ends = new Int32Array(parts.length);
  let at = 0;
  parts.forEach((part, i) => {
    starts[i] = at;
    at += part.length;
    ends[i] = at;
  });
  return { bytes: Buffer.concat(parts), starts, ends };
}

function byName(log: readonly StoredChainedEvent[]) {
  const order = new LogOrderCheck();
  for (const e of log) order.event({ streamName: e.streamName, revision: e.revision, position: e.position, chainHash: e.storedHash });
  order.finish();
  return order;
}

describe('the stream chain check fed the log in log order', () => {
  it('finds nothing in untouched random logs, and counts their streams and events', () => {
    const rng = seededRandom('stream chains in log order, untouched');
    for (let run = 0; run < 50; run++) {
      const log = randomLog(rng, intBelow(rng, 1, 30), 12);
      const found = inLogOrder(log);
      expect(found.problems).toEqual([]);
      expect([found.streams, found.events]).toEqual([new Set(log.map((e) => e.streamName)).size, log.length]);
    }
  });

  it.each(TAMPERINGS)('reports what the stream-by-stream check reports, for random logs tampered with: %s', (how) => {
    const rng = seededRandom(`stream chains in log order, ${how}`);
    let found = 0;
    for (let run = 0; run < 200; run++) {
      const log = tamper(rng, randomLog(rng, intBelow(rng, 1, 12), 10), how);
      const expected = streamByStream(log);
      expect(inLogOrder(log).problems).toEqual(expected);
      found += expected.length;
      // Offered to `continues` first: the same problems, counts and followed heads; the order check by slot as by name.
      const plain = new StreamChainsInLogOrder();
      for (const e of log) plain.event(e);
      plain.finish();
      const fed = asTheLogReadFeedsIt(log);
      expect([sorted(fed.chains.problems), fed.chains.streams, fed.chains.events]).toEqual([expected, plain.streams, plain.events]);
      for (const name of fed.names) expect(fed.chains.headOf(name)).toEqual(plain.headOf(name));
      const named = byName(log);
      expect([fed.order.problems, fed.order.runningHash, fed.order.events]).toEqual([named.problems, named.runningHash, named.events]);
    }
    // The tamperings are seen (an exchange of places alone changes no chain: LogOrderCheck names it).
    if (how !== 'places_exchanged') expect(found).toBeGreaterThan(100);
  });

  it("holds back a stream's events while an earlier revision is to come, and reports a revision that never comes by the first event after it", () => {
    const rng = seededRandom('stream chains in log order, long gap');
    const log = randomLog(rng, 3, 1).concat(
      (() => {
        const contents = Array.from({ length: 600 }, (_, r) => ({
          streamName: 'ledger-long',
          revision: BigInt(r),
          id: rng.uuid(),
          type: 'LedgerEntryPosted',
          dataJson: `{"r": ${r}}`,
          metadataJson: '{}',
        }));
        const hashes = chainHashes(null, contents);
        return contents.map((c, i) => ({ ...c, storedHash: hashes[i]!, position: `${5000 + i}/${5000 + i}` }));
      })(),
    );
    // Revision 3 comes last in the log, after 596 later revisions: past what is held back, it is reported missing once.
    const third = log.findIndex((e) => e.streamName === 'ledger-long' && e.revision === 3n);
    const moved = [...log.slice(0, third), ...log.slice(third + 1), log[third]!];
    expect(inLogOrder(moved).problems).toEqual([
      expect.objectContaining({ kind: 'event_missing', streamName: 'ledger-long', revision: 3n, position: '5004/5004' }),
    ]);
    // Moved only a few places: held back, checked in revision order, nothing wrong in the chain.
    const near = [...log];
    [near[third], near[third + 5]] = [near[third + 5]!, near[third]!];
    expect(inLogOrder(near).problems).toEqual([]);
    // Deleted: the same report as the stream-by-stream check.
    const deleted = log.filter((_, i) => i !== third);
    expect(inLogOrder(deleted).problems).toEqual(streamByStream(deleted));
    expect(inLogOrder(deleted).problems).toHaveLength(1);
  });
});
