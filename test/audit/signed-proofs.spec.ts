/**
 * Proofs an outsider can check (docs/audit-log.md, "Checking a proof without the
 * gateway"): the log's checkpoint and a merchant's statement verify with the gateway's
 * public key alone (node:crypto here, no gateway code; and the SDK's verifyStatement),
 * one changed byte of either does not; a closed period's statement is the same bytes on
 * every request, for the operator too, and after `projections:rebuild`; after
 * `audit:rotate-signing-key` the retired key still verifies what it signed and new
 * statements carry the new key; `log:verify --checkpoint` as a read-only role checks a
 * saved checkpoint and finds an edited event; the doc's curl, jq and openssl recipes run
 * as printed, and its psql export of the log as the read-only role too, every hash
 * recomputed from the file. The gateway runs with DATABASE_URL (the key sealed in the database); the
 * key file of the embedded default is checked on its own.
 */
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, randomUUID, sign, verify } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { AuditSigningKeys, publishedKeys, RetiredSigningKeyError, SIGNING_KEY_FILE } from '#payments/audit';
import { ManualClock } from '#platform/clock';
import { SecretBox, fixedKeys } from '#platform/secrets';
import { verifyStatement } from '../../libs/sdk/src';
import { ROOT, startProcess, temporaryDataDir } from '../support/gateway-process';
import { api, expectStatus, InvoiceGateway, Json, Merchant, orderId, poll, startInvoiceGateway } from '../support/merchant-fixtures';
import { fund } from '../support/money-out-fixtures';
import { after, fencedBlock, makeAuditorRole } from '../support/runbooks';
import { createTestDatabase, databaseUrl } from '../support/test-database';

/** RFC 8785 canonical JSON as an outsider writes it: keys sorted, no whitespace. */
const canonical = (v: Json): string =>
  Array.isArray(v)
    ? `[${v.map(canonical).join(',')}]`
    : v !== null && typeof v === 'object'
      ? `{${Object.keys(v)
          .sort()
          .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
          .join(',')}}`
      : JSON.stringify(v);

/** The statement's signature checked with nothing but node:crypto and the listed public keys. */
function statementHolds(text: string, keys: Json[]): boolean {
  const { signature, ...signed } = JSON.parse(text);
  const key = keys.find((k) => k.kid === signature.kid);
  return signature.alg === 'Ed25519' && verify(null, Buffer.from(canonical(signed)), createPublicKey(key.publicKey), Buffer.from(signature.value, 'base64'));
}

const checkpointHolds = (c: Json, keys: Json[]): boolean =>
  verify(null, Buffer.from(c.signedText), createPublicKey(keys.find((k) => k.kid === c.kid).publicKey), Buffer.from(c.signature, 'base64'));

/** `text` with the character at `at` replaced by another digit or letter. */
const oneByteChanged = (text: string, at: number): string => `${text.slice(0, at)}${text[at] === '1' ? '2' : '1'}${text.slice(at + 1)}`;

/** RFC 4180 CSV (as psql's \copy ... (FORMAT csv) writes it): rows of fields. */
function csvRows(text: string): string[][] {
  const rows: string[][] = [[]];
  const field = /("(?:[^"]|"")*"|[^,\n]*)(,|\n|$)/g;
  for (let m = field.exec(text); m && m.index < text.length; m = field.exec(text)) {
    rows[rows.length - 1]!.push(m[1]!.startsWith('"') ? m[1]!.slice(1, -1).replace(/""/g, '"') : m[1]!);
    if (m[2] === '\n') rows.push([]);
  }
  return rows.filter((r) => r.length > 0);
}

/**
 * docs/audit-log.md "What is hashed", from an exported log alone (node:crypto only): the
 * events whose chain hash is not the one their content gives, and L(n) at `position`.
 */
function logHashesFromCsv(csv: string, position: string): { wrong: string[]; atCheckpoint: string | null } {
  const [header, ...rows] = csvRows(csv);
  const col = (name: string) => header!.indexOf(name);
  const net = (s: string) => `${Buffer.byteLength(s, 'utf8')}:${s},`;
  const heads = new Map<string, Buffer>();
  const wrong: string[] = [];
  let running = Buffer.alloc(32);
  let atCheckpoint: string | null = null;
  for (const r of rows) {
    const [stream, revision] = [r[col('stream_name')]!, r[col('stream_revision')]!];
    const content = [stream, revision, r[col('event_id')]!, r[col('event_type')]!, r[col('data')]!, r[col('metadata')]!].map(net).join('');
    const chain = createHash('sha256')
      .update(Buffer.concat([heads.get(stream) ?? Buffer.alloc(32), Buffer.from(content, 'utf8')]))
      .digest();
    if (chain.toString('hex') !== r[col('chain_hash')]!.replace(/^\\x/, '')) wrong.push(`${stream} revision ${revision}`);
    heads.set(stream, chain);
    running = createHash('sha256')
      .update(Buffer.concat([running, chain]))
      .digest();
    if (`${r[col('transaction_id')]}/${r[col('global_position')]}` === position) atCheckpoint = running.toString('hex');
  }
  return { wrong, atCheckpoint };
}

describe('signed checkpoints and statements', () => {
  let gw: InvoiceGateway;
  let merchant: Merchant;
  let from: string;
  let to: string;
  let statement: string;
  let checkpoint: Json;
  const files = temporaryDataDir();
  const role = `auditor_${randomBytes(6).toString('hex')}`;

  const rawGet = async (pathAndQuery: string, token: string): Promise<{ status: number; text: string }> => {
    const r = await fetch(`${gw.gateway.baseUrl}${pathAndQuery}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: r.status, text: await r.text() };
  };
  const statementOf = (token = merchant.keys.test.secretKey) => rawGet(`/v1/statements?from=${from}&to=${to}`, token);
  const keys = async (): Promise<Json[]> => (await api(gw.gateway.baseUrl).get('/v1/audit/keys')).body.keys;

  beforeAll(async () => {
    gw = await startInvoiceGateway();
    merchant = await gw.operator.merchant({ holdHours: 0 });
    from = new Date(Date.now() - 60_000).toISOString();
    const balance = await fund(gw.operator, merchant, 'test', ['1000.00', '250.50']);
    expect(balance).toMatchObject({ pending: '0.00', reserved: '0.00' });
    // The period closes now: everything after this instant is outside it.
    to = new Date().toISOString();
    const later = await merchant.test.post('/v1/invoices', { orderId: orderId(), amount: '77.00', method: 'sbp' });
    expectStatus(await gw.operator.payment(later.body.id, 'paid'), 200);
  }, 120_000);

  afterAll(async () => {
    await gw?.close();
    files.remove();
    const admin = new PgClient({ connectionString: databaseUrl('postgres') });
    await admin.connect();
    await admin.query(`DROP ROLE IF EXISTS ${role}`);
    await admin.end();
  });

  it('GET /v1/audit/keys needs no authentication and lists the current Ed25519 key as PEM, before anything was signed', async () => {
    // Nothing signed yet: an outsider who saves the keys first (the doc's recipe) gets the key that will sign.
    const listed = await keys();
    expect(listed).toEqual([
      {
        kid: expect.stringMatching(/^[0-9a-f]{16}$/),
        alg: 'Ed25519',
        publicKey: expect.stringContaining('BEGIN PUBLIC KEY'),
        validFrom: expect.any(String),
        validUntil: null,
      },
    ]);
    const raw = createPublicKey(listed[0].publicKey).export({ format: 'der', type: 'spki' }).subarray(-32);
    expect(listed[0].kid).toBe(createHash('sha256').update(raw).digest('hex').slice(0, 16));
    expect((await gw.operator.http.get('/admin/v1/audit/checkpoint')).body.kid).toBe(listed[0].kid);
    expect(await keys()).toEqual(listed);
  });

  it('a checkpoint verifies with the public key alone; one changed byte of its text or signature does not', async () => {
    checkpoint = (await gw.operator.http.get('/admin/v1/audit/checkpoint')).body;
    expect(checkpoint).toMatchObject({
      algorithm: 'Ed25519',
      signedText: `gateway-log-checkpoint-v1\n${checkpoint.position}\n${checkpoint.events}\n${checkpoint.hash}`,
    });
    const listed = await keys();
    expect(checkpointHolds(checkpoint, listed)).toBe(true);
    expect(checkpointHolds({ ...checkpoint, signedText: oneByteChanged(checkpoint.signedText, checkpoint.signedText.length - 1) }, listed)).toBe(false);
    const signature = Buffer.from(checkpoint.signature, 'base64');
    signature[5]! ^= 1;
    expect(checkpointHolds({ ...checkpoint, signature: signature.toString('base64') }, listed)).toBe(false);
  });

  it('a statement verifies with the public key alone and with the SDK; one changed byte does not', async () => {
    const r = await statementOf();
    expect(r.status).toBe(200);
    statement = r.text;
    const doc = JSON.parse(statement);
    expect(canonical(doc)).toBe(statement);
    expect(doc).toMatchObject({
      object: 'statement',
      accountId: merchant.accountId,
      mode: 'test',
      currency: 'RUB',
      from,
      to,
      opening: { pending: '0.00', available: '0.00', reserved: '0.00' },
      checkpoint: { position: expect.stringMatching(/^\d+\/\d+$/), events: expect.any(Number), hash: expect.stringMatching(/^[0-9a-f]{64}$/) },
      signature: { kid: expect.any(String), alg: 'Ed25519', value: expect.any(String) },
    });
    // Every movement names its entry, bucket, cause and time; the closing is the opening plus them.
    // Two payments without a hold: each one movement into available; the later payment is after `to`.
    expect(doc.transactions.map((t: Json) => [t.bucket, t.cause.split(':')[0]])).toEqual([
      ['available', 'payment'],
      ['available', 'payment'],
    ]);
    for (const t of doc.transactions) expect(Object.keys(t).sort()).toEqual(['amount', 'bucket', 'cause', 'entryId', 'kind', 'occurredAt']);
    const sum = (bucket: string) =>
      doc.transactions.filter((t: Json) => t.bucket === bucket).reduce((s: number, t: Json) => s + Math.round(Number(t.amount) * 100), 0);
    expect(doc.closing).toEqual({ pending: '0.00', available: (sum('available') / 100).toFixed(2), reserved: '0.00' });
    expect(sum('pending')).toBe(0);

    const listed = await keys();
    expect(statementHolds(statement, listed)).toBe(true);
    expect(verifyStatement(statement, { keys: listed })).toBe(true);
    const amountAt = statement.indexOf('"amount":"') + '"amount":"'.length;
    const edited = oneByteChanged(statement, amountAt);
    expect(statementHolds(edited, listed)).toBe(false);
    expect(verifyStatement(edited, listed)).toBe(false);
  });

  it("a closed period's statement is the same bytes on a second request, for the operator, and bad periods are 400", async () => {
    expect((await statementOf()).text).toBe(statement);
    const operator = await rawGet(`/admin/v1/accounts/${merchant.accountId}/signed-statement?mode=test&from=${from}&to=${to}`, gw.gateway.adminToken);
    expect(operator).toEqual({ status: 200, text: statement });
    expect((await statementOf(merchant.keys.live.secretKey)).text).toContain('"mode":"live"');
    const unknown = await rawGet(`/admin/v1/accounts/${randomUUID()}/signed-statement?mode=test&from=${from}&to=${to}`, gw.gateway.adminToken);
    expect(unknown.status).toBe(404);
    expect((await rawGet(`/v1/statements?from=${to}&to=${from}`, merchant.keys.test.secretKey)).status).toBe(400);
    expect((await rawGet(`/v1/statements?from=${from}`, merchant.keys.test.secretKey)).status).toBe(400);
    expect((await fetch(`${gw.gateway.baseUrl}/v1/statements?from=${from}&to=${to}`)).status).toBe(401);
    // A period not ended yet: its closing balance is not known, and would be signed as the balance at its end.
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString();
    for (const [path, key] of [
      [`/v1/statements?from=${from}&to=${tomorrow}`, merchant.keys.test.secretKey],
      [`/admin/v1/accounts/${merchant.accountId}/signed-statement?mode=test&from=${from}&to=${tomorrow}`, gw.gateway.adminToken],
    ] as const) {
      const open = await rawGet(path, key);
      expect({ status: open.status, error: JSON.parse(open.text).error }).toMatchObject({ status: 400, error: { code: 'validation', param: 'to' } });
      expect(JSON.parse(open.text).error.details).toEqual([{ param: 'to', code: 'in_future', message: expect.stringContaining('прошедший период') }]);
    }
  });

  it('after projections:rebuild the statement is the same bytes', async () => {
    const rebuild = startProcess('rebuild', { DATABASE_URL: gw.db.url });
    expect(await rebuild.exited).toBe(0);
    const again = await poll(
      () => statementOf(),
      (r) => r.status === 200,
      'the statement after the rebuild',
      30_000,
    );
    expect(again.text).toBe(statement);
  }, 120_000);

  it('after a rotation the retired key still verifies the old statement, and new statements use the new key', async () => {
    const before = await keys();
    const rotate = startProcess('audit-rotate-signing-key', { DATABASE_URL: gw.db.url });
    expect(await rotate.exited).toBe(0);
    expect(rotate.output()).toContain(`key ${before[0].kid} retired`);
    const listed = await keys();
    expect(listed).toEqual([{ ...before[0], validUntil: expect.any(String) }, expect.objectContaining({ alg: 'Ed25519', validUntil: null })]);
    expect(statementHolds(statement, listed)).toBe(true);
    expect(checkpointHolds(checkpoint, listed)).toBe(true);
    const renewed = (await statementOf()).text;
    expect(JSON.parse(renewed).signature.kid).toBe(listed[1].kid);
    expect(statementHolds(renewed, listed)).toBe(true);
    const { signature: _old, ...content } = JSON.parse(statement);
    const { signature: _new, ...same } = JSON.parse(renewed);
    expect(same).toEqual(content);
    expect((await gw.operator.http.get('/admin/v1/audit/checkpoint')).body.kid).toBe(listed[1].kid);
  });

  it('the recipes of docs/audit-log.md check a checkpoint and a statement with curl, jq and openssl alone', () => {
    const doc = readFileSync(path.join(ROOT, 'docs', 'audit-log.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Checking a proof without the gateway'), doc.indexOf('### For an auditor'));
    const [fetchAll, checkCheckpoint, checkStatement] = ['Saved answers', 'A checkpoint,', 'A statement ('].map((m) => fencedBlock(after(section, m), 'sh'));
    const env = {
      PATH: process.env.PATH ?? '',
      GATEWAY: gw.gateway.baseUrl,
      ADMIN_TOKEN: gw.gateway.adminToken,
      SECRET_KEY: merchant.keys.test.secretKey,
      // The log's export, here as the database's owner (as the read-only role: the test of log:verify --checkpoint below).
      DATABASE_URL: gw.db.url,
    };
    const sh = (script: string) => spawnSync('bash', ['--norc', '--noprofile', '-eo', 'pipefail', '-c', script], { cwd: files.dir, env, encoding: 'utf8' });
    expect(sh(fetchAll).status).toBe(0);
    const verified = (script: string) => {
      const r = sh(script);
      return { status: r.status, output: r.stdout.trim() };
    };
    expect(verified(checkCheckpoint)).toEqual({ status: 0, output: 'Signature Verified Successfully' });
    // The period the doc asks for, then this test's closed period (signed by the key retired since), then one byte changed.
    expect(verified(checkStatement)).toEqual({ status: 0, output: 'Signature Verified Successfully' });
    writeFileSync(path.join(files.dir, 'statement.json'), statement);
    expect(verified(checkStatement)).toEqual({ status: 0, output: 'Signature Verified Successfully' });
    writeFileSync(path.join(files.dir, 'statement.json'), oneByteChanged(statement, statement.indexOf('"amount":"') + '"amount":"'.length));
    expect(verified(checkStatement)).toEqual({ status: 1, output: expect.stringContaining('Signature Verification Failure') });
  });

  it("a key's public key replaced in the table (its kid kept): not published, refused by log:verify and verifyStatement", async () => {
    const listed = await keys();
    const retired = listed.find((k) => k.validUntil !== null)!;
    expect(retired).toBeDefined();
    // An insider with write access to audit_signing_keys puts their own key in the retired one's row and signs with it.
    const insider = generateKeyPairSync('ed25519');
    const saved = (await gw.operator.http.get('/admin/v1/audit/checkpoint')).body;
    const forgedFile = path.join(files.dir, 'forged-under-retired-kid.json');
    writeFileSync(
      forgedFile,
      JSON.stringify({ ...saved, kid: retired.kid, signature: sign(null, Buffer.from(saved.signedText), insider.privateKey).toString('base64') }),
    );
    const { signature: _signature, ...content } = JSON.parse(statement);
    const forgedStatement = {
      ...content,
      signature: { kid: retired.kid, alg: 'Ed25519', value: sign(null, Buffer.from(canonical(content)), insider.privateKey).toString('base64') },
    };
    await gw.db.pool.query('UPDATE audit_signing_keys SET public_key = $2 WHERE kid = $1', [
      retired.kid,
      insider.publicKey.export({ format: 'pem', type: 'spki' }),
    ]);
    try {
      expect(await keys()).toEqual(listed.filter((k) => k.kid !== retired.kid));
      await gw.gateway.waitForOutput(new RegExp(`"kid":"${retired.kid}".*not published`));
      const run = startProcess('log-verify', { DATABASE_URL: gw.db.url }, ['--checkpoint', forgedFile]);
      expect({ code: await run.exited, output: run.output() }).toEqual({
        code: 1,
        output: expect.stringContaining(`forged-under-retired-kid.json: the public key listed as ${retired.kid} is not that key`),
      });
      expect(run.output()).not.toContain('signature holds');
      expect(verifyStatement(forgedStatement, await publishedKeys(gw.db.pool))).toBe(false);
    } finally {
      await gw.db.pool.query('UPDATE audit_signing_keys SET public_key = $2 WHERE kid = $1', [retired.kid, retired.publicKey]);
    }
    expect(await keys()).toEqual(listed);
  }, 60_000);

  it('log:verify --checkpoint as a read-only role: the signature holds, a changed checkpoint does not, an edited event is named', async () => {
    // JSON that a text-format COPY would escape (a backslash, a quote, a line break, Cyrillic): the export must keep it as stored.
    const awkward = await merchant.test.post('/v1/invoices', { orderId: orderId(), amount: '10.00', method: 'sbp', description: 'a\\b "c"\nд' });
    expectStatus(awkward, 201);
    const saved = (await gw.operator.http.get('/admin/v1/audit/checkpoint')).body;
    const checkpointFile = path.join(files.dir, 'checkpoint.json');
    const keysFile = path.join(files.dir, 'keys.json');
    const forgedFile = path.join(files.dir, 'forged.json');
    writeFileSync(checkpointFile, JSON.stringify(saved));
    writeFileSync(keysFile, JSON.stringify({ keys: await keys() }));
    writeFileSync(forgedFile, JSON.stringify({ ...saved, signedText: oneByteChanged(saved.signedText, saved.signedText.length - 1) }));
    await gw.gateway.kill();

    // The auditor's role, made with the SQL docs/operations.md prints (here the superuser owns the database and runs
    // each block; test/operations/read-only-tools.spec.ts runs them as the roles they name); no secrets key, a DATA_DIR of its own.
    const url = await makeAuditorRole({ owner: gw.db.url, createrole: gw.db.url }, role, role);
    const auditor = { DATABASE_URL: url, DATA_DIR: files.dir };
    // The doc's export of the log, run as printed by the auditor, and each chain hash and L(n) recomputed from the file.
    const doc = readFileSync(path.join(ROOT, 'docs', 'audit-log.md'), 'utf8');
    const exportLog = fencedBlock(after(doc, 'Saved answers'), 'sh')
      .split('\n')
      .filter((line) => line.startsWith('psql '))
      .join('\n');
    expect(exportLog).toContain("TO 'log.csv'");
    const exported = spawnSync('bash', ['--norc', '--noprofile', '-eo', 'pipefail', '-c', exportLog], {
      cwd: files.dir,
      // A client encoding other than UTF-8 (an auditor's Windows locale): the file is UTF-8 all the same, д one character.
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: url, PGCLIENTENCODING: 'WIN1251' },
      encoding: 'utf8',
    });
    expect({ status: exported.status, stderr: exported.stderr }).toEqual({ status: 0, stderr: '' });
    expect(logHashesFromCsv(readFileSync(path.join(files.dir, 'log.csv'), 'utf8'), saved.position)).toEqual({ wrong: [], atCheckpoint: saved.hash });
    const logVerify = async (args: string[]) => {
      const run = startProcess('log-verify', auditor, args);
      return { code: await run.exited, output: run.output() };
    };
    const ok = await logVerify(['--checkpoint', checkpointFile]);
    expect(ok).toEqual({ code: 0, output: expect.stringContaining(`signature holds under key ${saved.kid}`) });
    expect(ok.output).toContain(`off-site checkpoint at position ${saved.position} (${saved.events} events) reproduced`);
    // Without --keys it says whose key list it took: the audited database's, not an independent one.
    expect(ok.output).toContain(`signature holds under key ${saved.kid} (a key the audited database lists: give --keys for an independent check)`);
    const withKeys = await logVerify(['--checkpoint', checkpointFile, '--keys', keysFile]);
    expect(withKeys.code).toBe(0);
    expect(withKeys.output).toContain(`signature holds under key ${saved.kid}\n`);
    // An unsigned pair at the checkpoint's position that the log does not give fails, the signed checkpoint beside it notwithstanding.
    const other = await logVerify(['--expect', saved.position, 'ab'.repeat(32), '--checkpoint', checkpointFile, '--keys', keysFile]);
    expect(other).toEqual({ code: 1, output: expect.stringContaining(`the off-site checkpoint says ${'ab'.repeat(32)}`) });
    expect(other.output).not.toMatch(/^OK/m);
    const forged = await logVerify(['--checkpoint', forgedFile, '--keys', keysFile]);
    expect(forged).toEqual({ code: 1, output: expect.stringContaining(`the signature does not hold under key ${saved.kid}`) });
    // A failed check leaves no line saying OK.
    expect(forged.output).not.toMatch(/^OK/m);
    // Only signedText is signed: a readable field changed beside it (what an auditor may copy) fails too.
    const relabelled = path.join(files.dir, 'relabelled.json');
    writeFileSync(relabelled, JSON.stringify({ ...saved, hash: '0'.repeat(64) }));
    const misleading = await logVerify(['--checkpoint', relabelled, '--keys', keysFile]);
    expect(misleading).toEqual({ code: 1, output: expect.stringContaining('relabelled.json: its hash differs from the signed text') });
    expect(misleading.output).not.toMatch(/^OK/m);
    // A file that is not a checkpoint at all (a saved error answer): the check could not run (2), it did not fail (1).
    const notOne = path.join(files.dir, 'error-answer.json');
    writeFileSync(notOne, JSON.stringify({ error: { code: 'unauthorized', message: '…' } }));
    expect(await logVerify(['--checkpoint', notOne, '--keys', keysFile])).toEqual({
      code: 2,
      output: expect.stringContaining('error-answer.json: not a checkpoint saved from GET /admin/v1/audit/checkpoint'),
    });

    const target = (
      await gw.db.pool.query<{ global_position: string; stream_name: string; stream_revision: string }>(
        `SELECT global_position, stream_name, stream_revision FROM events WHERE stream_name LIKE 'invoice-%' ORDER BY global_position LIMIT 1`,
      )
    ).rows[0]!;
    await gw.db.pool.query(`UPDATE events SET data = jsonb_set(data, '{tampered}', 'true') WHERE global_position = $1`, [target.global_position]);
    const edited = await logVerify(['--checkpoint', checkpointFile]);
    expect(edited.code).toBe(1);
    expect(edited.output).toContain(`[data_changed] ${target.stream_name} revision ${target.stream_revision}`);
    // The stored chain hashes still fold to the checkpoint's hash, but L(n) folds the hashes the contents give: not reproduced.
    expect(edited.output).not.toContain(`off-site checkpoint at position ${saved.position} (${saved.events} events) reproduced`);
    expect(edited.output).toContain(
      `FAILED: the off-site checkpoint at position ${saved.position} is not reproduced: the stored chain hashes give its running hash, but the content of ${target.stream_name} revision ${target.stream_revision} at position `,
    );
  }, 120_000);

  // `--keys '{}'` beside a checkpoint stopped with "Cannot read properties of undefined (reading 'find')", and alone passed silently (exit 0).
  it('log:verify refuses a --keys file not shaped as GET /v1/audit/keys answers, naming it and what is wrong, before reading the log (exit 2)', async () => {
    const publicKey = generateKeyPairSync('ed25519').publicKey.export({ format: 'pem', type: 'spki' }).toString();
    const listed = { kid: '0123456789abcdef', alg: 'Ed25519', publicKey, validFrom: new Date().toISOString(), validUntil: null };
    // Shaped as a saved checkpoint (its signature is never checked: the keys are refused first).
    const checkpointFile = path.join(files.dir, 'checkpoint-beside-keys.json');
    writeFileSync(checkpointFile, JSON.stringify({ kid: listed.kid, signedText: `gateway-log-checkpoint-v1\n0/0\n0\n${'0'.repeat(64)}`, signature: 'AA==' }));
    const cases: [string, unknown, string][] = [
      ['empty.json', {}, 'not a saved answer of GET /v1/audit/keys (it has no "keys" list)'],
      ['no-kid.json', { keys: [{ ...listed, kid: undefined }] }, 'keys[0] has no kid'],
      ['other-alg.json', { keys: [listed, { ...listed, alg: 'RS256' }] }, `keys[1] (kid ${listed.kid}): alg is "RS256", not "Ed25519"`],
      ['not-a-key.json', { keys: [{ ...listed, publicKey: 'abc' }] }, `keys[0] (kid ${listed.kid}): publicKey is not a public key (SPKI PEM)`],
      ['not-json.json', '{"keys": [', 'not JSON'],
      // A secret given by mistake: said to be no JSON, none of it quoted (JSON.parse's message quotes its start).
      ['secrets.key', 'ab12cd34ef56ab12cd34ef56ab12cd34', 'not JSON'],
    ];
    for (const [name, content, what] of cases) {
      const file = path.join(files.dir, name);
      writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
      for (const args of [
        ['--checkpoint', checkpointFile, '--keys', file],
        ['--keys', file],
      ]) {
        const run = startProcess('log-verify', { DATABASE_URL: gw.db.url }, args);
        // One line and nothing else: no progress through the log, no report.
        expect({ args, code: await run.exited, output: run.output() }).toEqual({ args, code: 2, output: `log:verify: --keys ${file}: ${what}\n` });
      }
    }
  }, 60_000);
});

describe('the signing key from the file of the embedded default, and from AUDIT_SIGNING_KEY', () => {
  it('DATA_DIR/audit-signing.key: generated once with mode 0600, published, replaced by a rotation that retires it; then a configured key', async () => {
    const db = await createTestDatabase({ poolSize: 2 });
    const data = temporaryDataDir();
    try {
      const settings = { config: { auditSigningKey: null, databaseUrl: null, dataDir: data.dir }, secrets: new SecretBox(fixedKeys([randomBytes(32)])) };
      // One clock at a fixed instant, moved a minute before each new key: the keys are listed in their order.
      const clock = new ManualClock(() => Date.parse('2026-11-01T00:00:00Z'));
      const keys = new AuditSigningKeys(db.pool, settings, clock);
      const first = await keys.sign('text');
      const file = path.join(data.dir, SIGNING_KEY_FILE);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const pem = readFileSync(file, 'utf8');
      expect((await new AuditSigningKeys(db.pool, settings, new ManualClock()).sign('text')).kid).toBe(first.kid);
      expect(readFileSync(file, 'utf8')).toBe(pem);

      clock.setOffset(60_000);
      const rotated = await keys.rotate();
      expect(rotated.retired).toBe(first.kid);
      expect(readFileSync(file, 'utf8')).not.toBe(pem);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const second = await keys.sign('text');
      expect(second.kid).toBe(rotated.current);
      const listed = await publishedKeys(db.pool);
      expect(listed.map((k) => [k.kid, k.validUntil === null])).toEqual([
        [first.kid, false],
        [second.kid, true],
      ]);
      expect(verify(null, Buffer.from('text'), createPublicKey(listed[0]!.publicKey), Buffer.from(first.value, 'base64'))).toBe(true);
      // Not one private key in the table: it is in the file.
      expect((await db.pool.query('SELECT count(*)::int AS n FROM audit_signing_keys WHERE sealed_private_key IS NOT NULL')).rows[0].n).toBe(0);

      // AUDIT_SIGNING_KEY set: that key is published at its first signature and retires the one before; no rotation by command.
      const configured = generateKeyPairSync('ed25519').privateKey;
      clock.setOffset(120_000);
      const fromEnv = new AuditSigningKeys(db.pool, { ...settings, config: { ...settings.config, auditSigningKey: configured } }, clock);
      const third = await fromEnv.sign('text');
      expect((await publishedKeys(db.pool)).map((k) => [k.kid, k.validUntil === null])).toEqual([
        [first.kid, false],
        [second.kid, false],
        [third.kid, true],
      ]);
      expect(verify(null, Buffer.from('text'), createPublicKey(configured), Buffer.from(third.value, 'base64'))).toBe(true);
      await expect(fromEnv.rotate()).rejects.toThrow(/AUDIT_SIGNING_KEY is set/);
    } finally {
      data.remove();
      await db.drop();
    }
  });

  it('a retired key never becomes current again: the file key AUDIT_SIGNING_KEY retires is removed; a retired key is refused at start; periods follow each other', async () => {
    const db = await createTestDatabase({ poolSize: 2 });
    const data = temporaryDataDir();
    try {
      const settings = { config: { auditSigningKey: null, databaseUrl: null, dataDir: data.dir }, secrets: new SecretBox(fixedKeys([randomBytes(32)])) };
      const clock = new ManualClock(() => Date.parse('2026-11-01T00:00:00Z'));
      const file = path.join(data.dir, SIGNING_KEY_FILE);
      const fromFile = await new AuditSigningKeys(db.pool, settings, clock).sign('text');
      const filePem = readFileSync(file, 'utf8');
      // Started with AUDIT_SIGNING_KEY: its key current, the file's retired, and the file's private half dropped.
      const configured = generateKeyPairSync('ed25519').privateKey;
      const withEnv = { ...settings, config: { ...settings.config, auditSigningKey: configured } };
      clock.setOffset(60_000);
      const fromEnv = await new AuditSigningKeys(db.pool, withEnv, clock).sign('text');
      expect(existsSync(file)).toBe(false);
      // Started again without it: a new key of its own; the retired one stays retired.
      clock.setOffset(120_000);
      const fresh = await new AuditSigningKeys(db.pool, settings, clock).sign('text');
      expect(fresh.kid).not.toBe(fromFile.kid);
      const listed = await publishedKeys(db.pool);
      expect(listed.map((k) => [k.kid, k.validUntil === null])).toEqual([
        [fromFile.kid, false],
        [fromEnv.kid, false],
        [fresh.kid, true],
      ]);
      for (let i = 1; i < listed.length; i++) expect(listed[i - 1]!.validUntil).toBe(listed[i]!.validFrom);

      // The retired file key put back (a backup restored), or the retired AUDIT_SIGNING_KEY set again: refused, naming the key; nothing changes.
      writeFileSync(file, filePem, { mode: 0o600 });
      const restored = new AuditSigningKeys(db.pool, settings, clock);
      await expect(restored.refuseRetired()).rejects.toThrow(`${file} holds signing key ${fromFile.kid}, retired at ${listed[0]!.validUntil}`);
      await expect(restored.sign('text')).rejects.toThrow(RetiredSigningKeyError);
      await expect(new AuditSigningKeys(db.pool, withEnv, clock).refuseRetired()).rejects.toThrow(
        `AUDIT_SIGNING_KEY holds signing key ${fromEnv.kid}, retired at ${listed[1]!.validUntil}: a retired key never signs again. Set a new key there`,
      );
      expect(await publishedKeys(db.pool)).toEqual(listed);
      // The gateway does not start with it (exit 1, as with a missing secrets key) and says why.
      const gateway = startProcess('gateway', {
        DATABASE_URL: db.url,
        DATA_DIR: data.dir,
        PORT: '0',
        AUDIT_SIGNING_KEY: configured.export({ format: 'pem', type: 'pkcs8' }).toString(),
      });
      expect(await gateway.exited).toBe(1);
      expect(gateway.output()).toContain(`The gateway could not start: AUDIT_SIGNING_KEY holds signing key ${fromEnv.kid}, retired at`);
      expect(gateway.output()).toContain(`The current key is ${fresh.kid}.`);
      expect(await publishedKeys(db.pool)).toEqual(listed);
    } finally {
      data.remove();
      await db.drop();
    }
  }, 60_000);
});
