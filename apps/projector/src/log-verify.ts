import { createPublicKey, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadConfigOrExit, openInfrastructure, usageOnHelp } from '#payments/composition';
import type { PublishedKey } from '#payments/audit';
import { COMMAND_SESSION_LIMITS, outcomeDecided } from '#platform/database';
import { kidNamesKey } from '#platform/secrets';
import { verifyChainedLog, verifyEventLogInWorker, visibleLogEvents } from '#event-store';
import type { EventStoreDbEventStore } from '#event-store/eventstoredb';
import { createLogger } from '#platform/logging';
import { ProgressBar } from '#event-store/projections';
import { logReportLines } from './log-report';

const USAGE =
  'usage: npm run log:verify [-- --expect <position> <hash> ...] [--checkpoint <file> ...] [--keys <file>]\n' +
  '  position commit/prepare and hash 64 hex digits, or a file saved from GET /admin/v1/audit/checkpoint, its signature checked with\n' +
  '  the public key of its kid (from --keys, a saved answer of GET /v1/audit/keys, else from the database)';

/**
 * `--expect <position> <hash>` pairs, `--checkpoint <file>` and `--keys <file>`: checkpoints recorded off-site that the log must reproduce.
 * Each pair is kept, several at one position too: every one is checked (two hashes for one position cannot both hold).
 */
function parseArguments(args: readonly string[]): { expected: [string, string][]; checkpoints: string[]; keys: string | null } {
  const expected: [string, string][] = [];
  const checkpoints: string[] = [];
  let keys: string | null = null;
  for (let i = 0; i < args.length; i++) {
    const [flag, position, hash] = [args[i], args[i + 1], args[i + 2]];
    if ((flag === '--checkpoint' || flag === '--keys') && position) {
      if (flag === '--keys') keys = position;
      else checkpoints.push(position);
      i += 1;
      continue;
    }
    if (flag !== '--expect' || !position || !/^\d+\/\d+$/.test(position) || !hash || !/^[0-9a-fA-F]{64}$/.test(hash)) {
      process.stderr.write(`${USAGE}\n`);
      process.exit(2);
    }
    expected.push([position, hash]);
    i += 2;
  }
  return { expected, checkpoints, keys };
}

/**
 * A file's JSON, or an error saying it is not JSON without quoting it: JSON.parse's
 * message quotes the file's first characters, and the file may be a secret given by mistake.
 */
function readJsonFile(file: string, named?: string): unknown {
  const text = readFileSync(file, 'utf8');
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(named === undefined ? 'not JSON' : `${named}: not JSON`);
  }
}

/**
 * The public keys of a `--keys` file, a saved answer of GET /v1/audit/keys
 * (`{"keys": [{kid, alg: "Ed25519", publicKey, validFrom, validUntil}]}`); a file that
 * is not one ends the command before the log is read (exit 2), naming it and what is wrong.
 */
function readKeysFile(file: string): PublishedKey[] {
  const refuse = (what: string): never => {
    process.stderr.write(`log:verify: --keys ${file}: ${what}\n`);
    process.exit(2);
  };
  let saved: unknown;
  try {
    saved = readJsonFile(file);
  } catch (error) {
    return refuse((error as Error).message);
  }
  const keys = (saved as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) return refuse('not a saved answer of GET /v1/audit/keys (it has no "keys" list)');
  for (const [i, key] of (keys as unknown[]).entries()) {
    if (typeof key !== 'object' || key === null) return refuse(`keys[${i}] is not an object`);
    const { kid, alg, publicKey } = key as Record<string, unknown>;
    if (typeof kid !== 'string' || kid === '') return refuse(`keys[${i}] has no kid`);
    if (alg !== 'Ed25519') return refuse(`keys[${i}] (kid ${kid}): alg is ${JSON.stringify(alg)}, not "Ed25519"`);
    try {
      createPublicKey(String(publicKey));
    } catch {
      return refuse(`keys[${i}] (kid ${kid}): publicKey is not a public key (SPKI PEM)`);
    }
  }
  return keys as PublishedKey[];
}

/** A saved checkpoint whose Ed25519 signature holds under its kid's public key: its position and hash (from the signed text); else why not. */
function signedCheckpoint(file: string, keys: readonly PublishedKey[]): { position: string; hash: string; kid: string } | string {
  const c = readJsonFile(file, file) as {
    kid?: string;
    signedText?: string;
    signature?: string;
    position?: unknown;
    events?: unknown;
    hash?: unknown;
  };
  // Not a checkpoint at all (an error answer saved, another file): the check could not run (exit 2), nothing failed it.
  if (typeof c !== 'object' || c === null || typeof c.kid !== 'string' || typeof c.signedText !== 'string' || typeof c.signature !== 'string') {
    const missing =
      c === null || typeof c !== 'object'
        ? ['kid', 'signedText', 'signature']
        : (['kid', 'signedText', 'signature'] as const).filter((f) => typeof c[f] !== 'string');
    throw new Error(`${file}: not a checkpoint saved from GET /admin/v1/audit/checkpoint (it has no ${missing.join(', ')})`);
  }
  const key = keys.find((k) => k.kid === c.kid);
  if (!key) return `${file}: no public key with kid ${String(c.kid)} is listed`;
  // A listed key whose public key is not the one its kid names (the row or the file edited): refused, its signature not checked.
  if (!kidNamesKey(key))
    return `${file}: the public key listed as ${key.kid} is not that key (its SHA-256 does not begin with the kid): the key list was changed`;
  const [version, position, events, hash] = String(c.signedText).split('\n');
  if (version !== 'gateway-log-checkpoint-v1' || !position || !hash) return `${file}: not a signed checkpoint (gateway-log-checkpoint-v1)`;
  if (!verify(null, Buffer.from(c.signedText!, 'utf8'), createPublicKey(key.publicKey), Buffer.from(String(c.signature), 'base64'))) {
    return `${file}: the signature does not hold under key ${key.kid}: the checkpoint was not signed by the gateway, or was changed`;
  }
  // Only signedText is signed: the readable fields beside it must say the same, or a reader of them is misled.
  const differing = (['position', 'events', 'hash'] as const).filter((f) => c[f] !== undefined && String(c[f]) !== { position, events, hash }[f]);
  if (differing.length > 0)
    return `${file}: its ${differing.join(', ')} ${differing.length > 1 ? 'differ' : 'differs'} from the signed text: the file was changed after it was signed`;
  return { position, hash, kid: key.kid };
}

/**
 * `npm run log:verify`: recomputes every stream's hash chain and the log's running hash
 * from the events table (on EventStoreDB: from the chain hashes in the events'
 * metadata; checkpoints are recorded only over the PostgreSQL table), compares them with the stream heads and the recorded
 * checkpoints (and with checkpoints recorded off-site, `--expect`, or saved signed,
 * `--checkpoint`, whose signature is checked first), names the first
 * event whose data, order or presence changed, and exits 1 on any problem (0 when
 * everything holds, 2 when it could not run). Reads only: a read-only database role and
 * no secrets key are enough.
 */
async function main(): Promise<void> {
  usageOnHelp(USAGE);
  const { expected, checkpoints, keys } = parseArguments(process.argv.slice(2));
  const keysListed = keys === null ? null : readKeysFile(keys);
  const started = Date.now();
  const config = loadConfigOrExit('log:verify');
  const log = createLogger('log-verify', config.logLevel ?? 'warn');
  const infra = await openInfrastructure(config, log, { applicationName: 'gateway-log-verify', limits: COMMAND_SESSION_LIMITS, access: 'read-only' });
  let failed = false;
  try {
    const listed = checkpoints.length === 0 ? [] : (keysListed ?? (await (await import('#payments/audit')).publishedKeys(infra.pool)));
    for (const file of checkpoints) {
      const checked = signedCheckpoint(file, listed);
      if (typeof checked === 'string') {
        process.stdout.write(`FAILED: ${checked}\n`);
        failed = true;
      } else {
        // Without --keys the keys are the audited database's own list: a key added there signs as well as the gateway's.
        const from = keysListed === null ? ' (a key the audited database lists: give --keys for an independent check)' : '';
        process.stdout.write(`${file}: signature holds under key ${checked.kid}${from}\n`);
        expected.push([checked.position, checked.hash]);
      }
    }
    const bar = new ProgressBar('log:verify'.padEnd(16));
    const esdb = config.eventStore === 'eventstoredb';
    // Progress through the log in log events: on PostgreSQL one read of the log, its events counted first;
    // on EventStoreDB two (the log, then every stream), the second as long as the first.
    const total = esdb ? null : await visibleLogEvents(infra.pool);
    let logEvents = 0;
    const options = {
      at: [...new Set(expected.map(([position]) => position))],
      onProgress: (phase: 'streams' | 'log', events: number) => {
        if (phase === 'log') logEvents = events;
        const fraction = esdb ? (phase === 'log' ? 0 : 0.5 + events / (2 * Math.max(logEvents, events, 1))) : events / Math.max(total!, events, 1);
        const of = esdb ? (phase === 'log' ? '' : ` of ${logEvents}`) : ` of about ${total}`;
        bar.update(Math.min(fraction, 0.999), `${phase === 'log' ? 'the log' : 'the streams'}: ${events}${of} log events read`);
      },
    };
    // On EventStoreDB the chain hashes are in the events' metadata (docs/audit-log.md). On
    // PostgreSQL the chains are recomputed on a thread of their own (decision 0123).
    const report = esdb
      ? await verifyChainedLog((infra.store as EventStoreDbEventStore).chainedLog(), options)
      : await verifyEventLogInWorker(infra.pool, infra.databaseUrl, { applicationName: 'gateway-log-verify', readOnly: true, ...options });
    bar.update(1, `${report.events} of ${report.events} log events read`, true);
    const result = logReportLines(report, expected, failed);
    failed = result.failed;
    result.lines.splice(2, 0, `read in ${((Date.now() - started) / 1000).toFixed(1)} s; peak RSS ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB`);
    process.stdout.write(`${result.lines.join('\n')}\n`);
    outcomeDecided(failed ? 1 : 0); // the verdict is printed: a Ctrl-C while it closes does not change it
  } finally {
    await infra.close();
  }
  process.exit(failed ? 1 : 0);
}

main().catch((error) => {
  process.stderr.write(`log:verify failed to run: ${(error as Error).message}\n`);
  process.exit(2);
});
