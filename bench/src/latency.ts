import { Child, sleep, startAll, stopAll } from './fleet.js';
import { joinSamples, type LatencyResult } from './checks.js';
import { consumerCost } from './drain.js';
import type { ConsumerSpec, SystemSpec } from './protocol.js';
import { serverCpuWindow, type ServerCpu } from './server-cpu.js';

/** One system set up for a commit → start latency run, its consumer and submitter in two processes. */
export interface LatencyTarget {
  readonly system: string;
  /** Drops and recreates the system's tables, empty. */
  prepare(): Promise<void>;
  readonly consumer: ConsumerSpec;
  readonly submitter: SystemSpec;
}

/**
 * Starts the consumer, lets it settle (listening, polling), then a submitter in another process
 * commits `warmup + count` commands one every `intervalMs`. Each sample joins a command's commit
 * time (taken when COMMIT returned in the submitter) with its start time in the executor. With a
 * `server` meter, the database server's CPU from the consumer's go to its exit is divided by the
 * commands run (warm-up included, as the consumer's own CPU); it includes the submitter's inserts.
 */
export async function runLatency(
  target: LatencyTarget,
  count: number,
  intervalMs: number,
  warmup: number,
  timeoutMs: number,
  server?: ServerCpu,
): Promise<StartLatency> {
  await target.prepare();
  const total = warmup + count;
  const [consumer] = await startAll('consumer', [target.consumer]);
  let submitter: Child | undefined;
  try {
    const serverCpu = await serverCpuWindow(server);
    consumer!.send({ type: 'go' });
    await sleep(500);
    submitter = Child.start('submitter', {
      mode: 'paced',
      system: target.submitter,
      count: total,
      intervalMs,
    });
    await submitter.waitFor('ready', 30_000);
    submitter.send({ type: 'go' });
    const commits = await submitter.waitFor('commits', timeoutMs);
    const deadline = performance.now() + 30_000;
    while (consumer!.executed < total) {
      if (consumer!.errors.length > 0) throw new Error(consumer!.errors.join('; '));
      if (performance.now() > deadline) throw new Error(`only ${consumer!.executed}/${total} started`);
      await sleep(10);
    }
    await stopAll([consumer!, submitter]);
    const executions = await consumer!.waitFor('executions', 5_000);
    const { seqs, starts } = executions;
    const cost = {
      ...consumerCost([executions], seqs.length),
      dbCpuUsPerCommand: await serverCpu(seqs.length),
    };
    return {
      fromCommit: { ...joinSamples(commits.seqs, commits.commits, seqs, starts, warmup), ...cost },
      fromBegin: { ...joinSamples(commits.seqs, commits.begins ?? [], seqs, starts, warmup), ...cost },
    };
  } finally {
    consumer!.kill();
    submitter?.kill();
  }
}

/** Latencies to the start in the executor: from COMMIT returned, and from BEGIN (the transaction included). */
export interface StartLatency {
  readonly fromCommit: LatencyResult;
  readonly fromBegin: LatencyResult;
}

/** IMMEDIATE mode: submitter and executor in one child process (workers/immediate.js). */
export async function runImmediateLatency(
  prepare: () => Promise<void>,
  system: SystemSpec,
  count: number,
  intervalMs: number,
  warmup: number,
  timeoutMs: number,
): Promise<StartLatency> {
  await prepare();
  const total = warmup + count;
  const child = Child.start('immediate', { mode: 'paced', system, count: total, intervalMs });
  try {
    await child.waitFor('ready', 30_000);
    child.send({ type: 'go' });
    const executions = await child.waitFor('executions', timeoutMs);
    const commits = await child.waitFor('commits', 1_000);
    await child.stop();
    const { seqs, starts } = executions;
    return {
      fromCommit: joinSamples(commits.seqs, commits.commits, seqs, starts, warmup),
      fromBegin: joinSamples(commits.seqs, commits.begins ?? [], seqs, starts, warmup),
    };
  } finally {
    child.kill();
  }
}
