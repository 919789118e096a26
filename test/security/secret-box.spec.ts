/**
 * Sealing secrets at rest (libs/platform/src/secrets/secret-box.ts): AES-256-GCM, a random IV
 * per value, the owner as associated data, the key id in the value.
 */
import { randomBytes } from 'node:crypto';
import { fixedKeys, keyIdOf, SecretBox, SecretKeyMissingError, sealedKeyId } from '#platform/secrets';

describe('SecretBox', () => {
  const k1 = randomBytes(32);
  const k2 = randomBytes(32);
  const box = new SecretBox(fixedKeys([k1]));

  it('seals with a random IV, names the key, and opens for the same owner only', () => {
    const a = box.seal('whsec_secret', 'projects.webhook_secret:p1');
    const b = box.seal('whsec_secret', 'projects.webhook_secret:p1');
    expect(a).not.toBe(b);
    expect(a).toMatch(new RegExp(`^sealed:v1:${keyIdOf(k1)}:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]+$`));
    expect(a).not.toContain('secret');
    expect(sealedKeyId(a)).toBe(keyIdOf(k1));
    expect(box.open(a, 'projects.webhook_secret:p1')).toBe('whsec_secret');
    expect(() => box.open(a, 'projects.webhook_secret:p2')).toThrow();
  });

  it('refuses an altered value', () => {
    const sealed = box.seal('whsec_secret', 'o');
    // A character inside the ciphertext (each carries six bits of it; the last one may carry padding).
    const at = sealed.length - 10;
    const altered = `${sealed.slice(0, at)}${sealed[at] === 'A' ? 'B' : 'A'}${sealed.slice(at + 1)}`;
    expect(() => box.open(altered, 'o')).toThrow();
    expect(() => box.open('whsec_plain', 'o')).toThrow('not a sealed secret');
  });

  it('opens with every key it holds, seals with the first; a missing key is named', () => {
    const old = box.seal('s', 'o');
    const rotated = new SecretBox(fixedKeys([k2, k1]));
    expect(rotated.open(old, 'o')).toBe('s');
    expect(sealedKeyId(rotated.seal('s', 'o'))).toBe(keyIdOf(k2));
    const stranger = new SecretBox(fixedKeys([randomBytes(32)]));
    expect(() => stranger.open(old, 'o')).toThrow(SecretKeyMissingError);
    expect(() => stranger.open(old, 'o')).toThrow(keyIdOf(k1));
  });

  it('derives distinct keys per purpose, the same in every process holding the key', () => {
    const [a] = new SecretBox(fixedKeys([k1])).derivedKeys('payment-page-form');
    const [b] = new SecretBox(fixedKeys([k1])).derivedKeys('payment-page-form');
    const [c] = new SecretBox(fixedKeys([k1])).derivedKeys('something-else');
    expect(a!.equals(b!)).toBe(true);
    expect(a!.equals(c!)).toBe(false);
    expect(a!.equals(k1)).toBe(false);
  });
});
