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
  /** Forces a checkpoint on the server. */
  checkpoint(): Promise<void>;
}

/**
 * `count` single-command transactions from `clients` concurrent clients in a child process, timed
 * after `warmup` untimed ones.
 */
export async function runSubmits(
  target: SubmitTarget,
  count: number,
  clients: number,
  warmup: number,
  timeoutMs: number,
): Promise<{ rate: number; check: string }> {
  await target.prepare();
  // Every system starts from a fresh checkpoint: the first write to each page after one costs a
  // full-page image in the WAL, and a checkpoint falling inside one system's run would skew it.
  await target.checkpoint();
  const child = Child.start('submitter', {
    mode: 'burst',
    system: target.submitter,
    count,
    clients,
    warmup,
  });
  try {
    await child.waitFor('ready', 30_000);
    child.send({ type: 'go' });
    const burst = await child.waitFor('burst', timeoutMs);
    await child.stop();
    const rows = await target.count();
    const all = count + warmup;
    if (rows !== all) throw new Error(`${rows} rows in the database after ${all} submits`);
    return { rate: rate(count, burst.elapsedMs), check: `${rows}/${all} rows committed ✓` };
  } finally {
    child.kill();
  }
}
