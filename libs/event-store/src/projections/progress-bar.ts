/**
 * A progress bar on stderr: redrawn in place on a terminal, one line a second
 * (and the last one) otherwise, so CI logs stay readable.
 */
export class ProgressBar {
  private lastLineAt = 0;
  private readonly startedAt = Date.now();
  private readonly tty: boolean;

  constructor(
    private readonly label: string,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.tty = Boolean(stream.isTTY);
  }

  update(fraction: number, detail: string, final = false): void {
    const now = Date.now();
    if (!this.tty && !final && now - this.lastLineAt < 1000) return;
    this.lastLineAt = now;
    const f = Math.max(0, Math.min(1, Number.isFinite(fraction) ? fraction : 1));
    const width = 30;
    const filled = Math.round(f * width);
    const bar = `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
    const line = `${this.label} ${bar} ${(f * 100).toFixed(1).padStart(5)}% ${detail}`;
    this.stream.write(this.tty ? `\r${line}${final ? '\n' : ''}` : `${line}\n`);
  }

  elapsedSeconds(): number {
    return (Date.now() - this.startedAt) / 1000;
  }
}
