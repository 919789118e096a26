import { randomBytes } from 'node:crypto';
import { KeyTags } from './key-tags';

describe('KeyTags', () => {
  const tags = new KeyTags(randomBytes(32));

  it('issues keys of the usual shape that carry their tag', () => {
    for (const mode of ['test', 'live'] as const) {
      const secret = tags.newSecretKey(mode);
      const publicId = tags.newPublicId(mode);
      expect(secret).toMatch(new RegExp(`^sk_${mode}_[A-Za-z0-9_-]{32}$`));
      expect(publicId).toMatch(new RegExp(`^pk_${mode}_[A-Za-z0-9_-]{24}$`));
      expect(tags.isSecretKey(secret)).toBe(true);
      expect(tags.isPublicId(publicId)).toBe(true);
      // Each kind only as itself.
      expect(tags.isPublicId(secret)).toBe(false);
      expect(tags.isSecretKey(publicId)).toBe(false);
    }
  });

  it('refuses random keys, a changed character, another mode, another gateway and a non-canonical spelling', () => {
    const secret = tags.newSecretKey('test');
    expect(tags.isSecretKey(`sk_test_${randomBytes(24).toString('base64url')}`)).toBe(false);
    const flipped = secret.slice(0, 10) + (secret[10] === 'A' ? 'B' : 'A') + secret.slice(11);
    expect(tags.isSecretKey(flipped)).toBe(false);
    expect(tags.isSecretKey(secret.replace('sk_test_', 'sk_live_'))).toBe(false);
    expect(new KeyTags(randomBytes(32)).isSecretKey(secret)).toBe(false);
    expect(tags.isSecretKey(`${secret}x`)).toBe(false);
    expect(tags.isSecretKey('')).toBe(false);
    expect(tags.isSecretKey(`Bearer ${secret}`)).toBe(false);
  });
});
