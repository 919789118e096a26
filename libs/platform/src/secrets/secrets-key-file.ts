import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fixedKeys, SecretKeySource } from './secret-box';
import { writeSecretFile, writeSecretFileOnce } from './secret-file';

/** The key file under DATA_DIR when SECRETS_KEY is not set. */
export const SECRETS_KEY_FILE = 'secrets.key';

export const secretsKeyFileOf = (dataDir: string): string => path.join(path.resolve(dataDir), SECRETS_KEY_FILE);

/** The keys of a key file: one per line, 64 hex digits, the current one first. */
function readKeys(file: string): Buffer[] {
  const keys = readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  if (keys.length === 0 || keys.some((k) => !/^[0-9a-f]{64}$/i.test(k))) {
    throw new Error(`${file} must hold keys of 64 hex digits, one per line, the current one first`);
  }
  return keys.map((k) => Buffer.from(k, 'hex'));
}

/** Writes the key file whole (writeSecretFile), mode 0600. */
export const writeKeyFile = (file: string, keys: readonly Buffer[]): void => writeSecretFile(file, `${keys.map((k) => k.toString('hex')).join('\n')}\n`);

/**
 * The keys of DATA_DIR/secrets.key, generated on first use (32 random bytes, mode
 * 0600; two processes starting at once agree: the file is created exclusively). The
 * file is read again when it changes (a rotation by `secrets:rotate-key`).
 */
export function keyFileSource(dataDir: string): SecretKeySource & { readonly file: string } {
  const file = secretsKeyFileOf(dataDir);
  mkdirSync(path.dirname(file), { recursive: true });
  writeSecretFileOnce(file, `${randomBytes(32).toString('hex')}\n`);
  let keys = readKeys(file);
  let stamp = stampOf(file);
  return {
    file,
    keys: () => keys,
    refresh() {
      const now = stampOf(file);
      if (now === stamp) return;
      keys = readKeys(file);
      stamp = now;
    },
  };
}

function stampOf(file: string): string {
  const s = statSync(file);
  return `${s.ino}:${s.mtimeMs}:${s.size}`;
}

/** SECRETS_KEY when set, else the key file under DATA_DIR. */
export function secretKeySource(config: { readonly secretsKeys: readonly Buffer[] | null; readonly dataDir: string }): SecretKeySource {
  return config.secretsKeys ? fixedKeys(config.secretsKeys) : keyFileSource(config.dataDir);
}
