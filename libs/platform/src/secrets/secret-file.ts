import { chmodSync, closeSync, existsSync, linkSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * Creates `file` with `contents` and mode 0600 unless it exists. Written whole to a
 * file of its own, then linked into place: the link fails when another process got
 * there first (its file stays), and nobody ever reads a half-written secret.
 */
export function writeSecretFileOnce(file: string, contents: string): void {
  if (existsSync(file)) return;
  const candidate = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.new`;
  const fd = openSync(candidate, 'wx', 0o600);
  try {
    writeSync(fd, contents);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(candidate, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    unlinkSync(candidate);
  }
}

/** Writes `file` whole (a temporary file renamed over it), mode 0600. */
export function writeSecretFile(file: string, contents: string): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  const fd = openSync(temporary, 'w', 0o600);
  try {
    writeSync(fd, contents);
  } finally {
    closeSync(fd);
  }
  chmodSync(temporary, 0o600);
  renameSync(temporary, file);
}
