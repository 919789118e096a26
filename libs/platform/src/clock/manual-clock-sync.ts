import type { Pool } from 'pg';
import type { Migration } from '../database';
import type { ManualClock } from './clock';

export const manualClockMigration: Migration = {
  id: 'platform:0001_manual_clock',
  sql: `
CREATE TABLE manual_clock (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  offset_ms bigint NOT NULL DEFAULT 0 CHECK (offset_ms >= 0)
);
INSERT INTO manual_clock (singleton, offset_ms) VALUES (true, 0);
`,
};

/**
 * Keeps a ManualClock's offset equal to the one stored in the database, so every
 * process (API, projector, workers) agrees on the time. Advancing writes the
 * database first and then the local clock; other processes follow within one poll.
 */
export class ManualClockSync {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly pool: Pool,
    private readonly clock: ManualClock,
    private readonly pollIntervalMs = 200,
  ) {}

  async start(): Promise<void> {
    await this.refresh();
    const tick = async () => {
      await this.refresh().catch(() => undefined);
      if (this.timer) this.timer = setTimeout(tick, this.pollIntervalMs);
    };
    this.timer = setTimeout(tick, this.pollIntervalMs);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  async refresh(): Promise<void> {
    const result = await this.pool.query<{ offset_ms: string }>('SELECT offset_ms FROM manual_clock');
    if (result.rows[0]) this.clock.setOffset(Number(result.rows[0].offset_ms));
  }

  /** Moves the shared clock forward by whole seconds (0 just reads it). */
  async advance(seconds: number): Promise<Date> {
    const result = await this.pool.query<{ offset_ms: string }>('UPDATE manual_clock SET offset_ms = offset_ms + $1 RETURNING offset_ms', [seconds * 1000]);
    this.clock.setOffset(Number(result.rows[0]!.offset_ms));
    return this.clock.now();
  }
}
