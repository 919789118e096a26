/**
 * verifyStatement without a gateway: a statement signed by a listed key verifies, one
 * changed byte does not, and a listed key whose kid is not the digest of its public key
 * (a key put in a retired one's place, its kid kept) never verifies. The statements a
 * gateway signs are checked in test/audit/signed-proofs.spec.ts.
 */
import { createHash, generateKeyPairSync, KeyObject, sign } from 'node:crypto';
import { canonicalJson, verifyStatement } from '../../libs/sdk/src';

const kidOf = (key: KeyObject) =>
  createHash('sha256')
    .update(key.export({ format: 'der', type: 'spki' }).subarray(-32))
    .digest('hex')
    .slice(0, 16);
const pem = (key: KeyObject) => key.export({ format: 'pem', type: 'spki' }).toString();
const CONTENT = {
  object: 'statement',
  accountId: 'acc-1',
  mode: 'live',
  from: '2026-11-01T00:00:00.000Z',
  to: '2026-12-01T00:00:00.000Z',
  closing: { available: '100.00' },
  transactions: [],
};
const signed = (privateKey: KeyObject, kid: string) => ({
  ...CONTENT,
  signature: { kid, alg: 'Ed25519', value: sign(null, Buffer.from(canonicalJson(CONTENT)), privateKey).toString('base64') },
});

describe('verifyStatement', () => {
  const gateway = generateKeyPairSync('ed25519');
  const kid = kidOf(gateway.publicKey);
  const listed = { kid, alg: 'Ed25519', publicKey: pem(gateway.publicKey), validFrom: '2026-11-01T00:00:00.000Z', validUntil: null };

  it('holds under the listed key of its kid, as text or parsed; not once a byte changed', () => {
    const doc = signed(gateway.privateKey, kid);
    expect(verifyStatement(doc, [listed])).toBe(true);
    expect(verifyStatement(JSON.stringify(doc), { keys: [listed] })).toBe(true);
    expect(verifyStatement({ ...doc, accountId: 'acc-2' }, [listed])).toBe(false);
  });

  it('with what it must be of, refuses a well-signed statement of another mode, account or period', () => {
    const doc = signed(gateway.privateKey, kid);
    const november = { accountId: 'acc-1', mode: 'live' as const, from: '2026-11-01T00:00:00Z', to: new Date('2026-12-01T00:00:00Z') };
    expect(verifyStatement(doc, [listed], november)).toBe(true);
    expect(verifyStatement(doc, [listed], { ...november, mode: 'test' })).toBe(false);
    expect(verifyStatement(doc, [listed], { ...november, accountId: 'acc-2' })).toBe(false);
    expect(verifyStatement(doc, [listed], { ...november, from: '2026-10-01T00:00:00Z' })).toBe(false);
    expect(verifyStatement(doc, [listed], { ...november, to: '2026-11-30T00:00:00Z' })).toBe(false);
    // Nothing expected: the signature alone, as before; expected with nothing in it (unset variables) is a TypeError.
    expect(verifyStatement(doc, [listed])).toBe(true);
    expect(() => verifyStatement(doc, [listed], { accountId: undefined, mode: undefined })).toThrow(TypeError);
  });

  it('a listed key whose kid is not its own never verifies, even what it signed', () => {
    const insider = generateKeyPairSync('ed25519');
    // The retired key's row with the insider's public key in it, its kid kept.
    const replaced = { ...listed, publicKey: pem(insider.publicKey), validUntil: '2026-11-02T00:00:00.000Z' };
    expect(verifyStatement(signed(insider.privateKey, kid), [replaced])).toBe(false);
    expect(verifyStatement(signed(insider.privateKey, kid), { keys: [replaced] })).toBe(false);
    // The same key under its own kid does verify: only the mismatch is refused.
    expect(verifyStatement(signed(insider.privateKey, kidOf(insider.publicKey)), [{ ...replaced, kid: kidOf(insider.publicKey) }])).toBe(true);
  });
});
