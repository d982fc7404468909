import { Child } from './fleet.js';
import type { SystemSpec } from './protocol.js';
import { rate } from './stats.js';

/** One system set up for the single-submit throughput run. */
export interface SubmitTarget {
  readonly system: string;
  /** Drops and recreates the system's tables, empty. */
  prepare(): Promise<void>;
  readonly submitter: SystemSpec;
  /** Rows the database holds afterwards: must equal the submits. */
  count(): Promise<number>;
}

/** `count` single-command transactions from `clients` concurrent clients in a child process. */
export async function runSubmits(
  target: SubmitTarget,
  count: number,
  clients: number,
  timeoutMs: number,
): Promise<{ rate: number; check: string }> {
  await target.prepare();
  const child = Child.start('submitter', { mode: 'burst', system: target.submitter, count, clients });
  try {
    await child.waitFor('ready', 30_000);
    child.send({ type: 'go' });
    const burst = await child.waitFor('burst', timeoutMs);
    await child.stop();
    const rows = await target.count();
    if (rows !== count) throw new Error(`${rows} rows in the database after ${count} submits`);
    return { rate: rate(count, burst.elapsedMs), check: `${rows}/${count} rows committed ✓` };
  } finally {
    child.kill();
  }
}
