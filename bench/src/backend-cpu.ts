import { readFileSync } from 'node:fs';
import type pg from 'pg';

const CLOCK_TICK_US = 10_000; // USER_HZ = 100 on Linux

interface BackendTimes {
  /** utime + stime, µs (10 ms resolution). */
  readonly statUs: number;
  /** Scheduler run time, µs. */
  readonly runUs: number;
}

function backendTimes(pid: number): BackendTimes | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const statUs = (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_US;
    const runNs = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
    return { statUs, runUs: runNs / 1000 };
  } catch {
    return null;
  }
}

/**
 * Follows the consumer's backends: every `everyMs` it asks which backends carry the consumer's
 * application_name and reads their times; a backend's share is its last reading minus its first
 * (zero for one that connected during the drain: its start-up counts).
 */
export class BackendSampler {
  readonly #first = new Map<number, BackendTimes>();
  readonly #last = new Map<number, BackendTimes>();
  #timer: NodeJS.Timeout | undefined;
  #sampling: Promise<void> = Promise.resolve();
  #started = false;

  constructor(
    private readonly admin: pg.Pool,
    private readonly applicationName: string,
  ) {}

  async sample(): Promise<void> {
    const { rows } = await this.admin.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
      [this.applicationName],
    );
    for (const { pid } of rows) {
      const times = backendTimes(pid);
      if (times === null) continue;
      if (!this.#first.has(pid)) this.#first.set(pid, this.#started ? ZERO : times);
      this.#last.set(pid, times);
    }
  }

  async start(everyMs = 50): Promise<void> {
    await this.sample();
    this.#started = true;
    this.#timer = setInterval(() => {
      this.#sampling = this.#sampling.then(() => this.sample()).catch(() => undefined);
    }, everyMs);
  }

  async stop(): Promise<{ statUs: number; runUs: number; backends: number }> {
    clearInterval(this.#timer);
    await this.#sampling;
    await this.sample();
    let statUs = 0;
    let runUs = 0;
    for (const [pid, last] of this.#last) {
      const first = this.#first.get(pid) ?? ZERO;
      statUs += last.statUs - first.statUs;
      runUs += last.runUs - first.runUs;
    }
    return { statUs, runUs, backends: this.#last.size };
  }
}

const ZERO: BackendTimes = { statUs: 0, runUs: 0 };
