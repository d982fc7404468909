/**
 * A one-line progress bar redrawn with \r on a terminal; on a pipe or a CI log, a plain line every
 * 10 % instead, so logs stay readable.
 */
export class ProgressBar {
  private lastDecile = -1;
  private drawn = false;

  constructor(
    private readonly out: NodeJS.WriteStream = process.stderr,
    private readonly width = 30,
  ) {}

  get interactive(): boolean {
    return this.out.isTTY === true;
  }

  update(label: string, done: number, total: number, detail: string): void {
    const ratio = total === 0 ? 1 : Math.min(1, done / total);
    if (this.interactive) {
      const filled = Math.round(ratio * this.width);
      const bar = '█'.repeat(filled) + '░'.repeat(this.width - filled);
      this.out.write(
        `\r${label} [${bar}] ${String(done).padStart(String(total).length)}/${total}  ${detail}\x1b[K`,
      );
      this.drawn = true;
      return;
    }
    const decile = Math.floor(ratio * 10);
    if (decile !== this.lastDecile) {
      this.lastDecile = decile;
      this.out.write(`${label} ${Math.round(ratio * 100)}% (${done}/${total})  ${detail}\n`);
    }
  }

  /** Ends the bar's line and resets for the next phase. */
  done(): void {
    if (this.interactive && this.drawn) this.out.write('\n');
    this.drawn = false;
    this.lastDecile = -1;
  }
}
