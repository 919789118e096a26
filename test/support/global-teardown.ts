import { rmSync } from 'node:fs';
import type { EmbeddedDatabase } from '#platform/database';

export default async function globalTeardown(): Promise<void> {
  const started = (globalThis as Record<string, unknown>).__TEST_POSTGRES__ as { server: EmbeddedDatabase; dir: string } | undefined;
  if (!started) return;
  await started.server.stop();
  rmSync(started.dir, { recursive: true, force: true });
}
