import { Child, sleep, startAll, stopAll } from './fleet.js';
import { joinSamples, type LatencyResult } from './checks.js';
import { consumerCost } from './drain.js';
import type { ConsumerSpec, SystemSpec } from './protocol.js';
import type { Sizes } from './scenarios/sizes.js';
import { percentile } from './stats.js';
import { serverCpuWindow, type ServerCpu } from './server-cpu.js';

/** One system set up for a commit → start latency run, its consumer and submitter in two processes. */
export interface LatencyTarget {
  readonly system: string;
  /** Drops and recreates the system's tables, empty. */
  prepare(): Promise<void>;
  readonly consumer: ConsumerSpec;
  readonly submitter: SystemSpec;
  /** The last submit this many ms after the one before it, not `intervalMs` (wake-probe.ts). */
  readonly lastGapMs?: number;
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
      ...(target.lastGapMs === undefined ? {} : { lastGapMs: target.lastGapMs }),
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

/**
 * Several rounds' results of one system pooled: samples concatenated (percentiles are then taken
 * over all of them), per-command costs averaged over the rounds, the largest peak RSS.
 */
export function pooledLatency(rounds: readonly LatencyResult[]): LatencyResult {
  const mean = (pick: (r: LatencyResult) => number | undefined): number =>
    rounds.reduce((n, r) => n + (pick(r) ?? Number.NaN), 0) / rounds.length;
  return {
    samples: rounds.flatMap((r) => r.samples),
    check: roundsCheck(rounds.map((r) => r.check)),
    cpuUsPerCommand: mean((r) => r.cpuUsPerCommand),
    dbCpuUsPerCommand: mean((r) => r.dbCpuUsPerCommand),
    peakRssMb: Math.max(...rounds.map((r) => r.peakRssMb ?? Number.NaN)),
    diagnostics: [
      `p50 / p99 per round: ${rounds
        .map((r) => `${fmt(percentile(r.samples, 50))} / ${fmt(percentile(r.samples, 99))}`)
        .join(', ')} ms`,
    ],
  };
}

const fmt = (ms: number): string => ms.toFixed(2);

function roundsCheck(checks: readonly string[]): string {
  const distinct = [...new Set(checks)].join('; ');
  return checks.length > 1 ? `${checks.length} rounds, each ${distinct}` : distinct;
}

/** The rounds of one target: their results, or the failure that ended them. */
export type RoundsOutcome<R> = { readonly results: R[] } | { readonly error: unknown };

/**
 * Runs each target `rounds` times, the targets taking turns and round r starting with target
 * r mod n (A B, B A, …): every system's samples then come from the same stretches of machine load,
 * instead of one system's whole run meeting a busy minute the other missed. A target that fails a
 * round is not run again.
 */
export async function interleavedRounds<T, R>(
  targets: readonly T[],
  rounds: number,
  run: (target: T) => Promise<R>,
): Promise<RoundsOutcome<R>[]> {
  const outcomes: RoundsOutcome<R>[] = targets.map(() => ({ results: [] }));
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < targets.length; k++) {
      const i = (round + k) % targets.length;
      const outcome = outcomes[i]!;
      if (!('results' in outcome)) continue;
      try {
        outcome.results.push(await run(targets[i]!));
      } catch (error) {
        outcomes[i] = { error };
      }
    }
  }
  return outcomes;
}

/** A target's pooled rounds as the promise the recorder takes: rejected with the round's failure. */
export async function pooledRounds<R, P>(outcome: RoundsOutcome<R>, pool: (results: R[]) => P): Promise<P> {
  if ('error' in outcome) throw outcome.error;
  return pool(outcome.results);
}

/** Both figures of StartLatency pooled over rounds. */
export function pooledStartLatency(rounds: readonly StartLatency[]): StartLatency {
  return {
    fromCommit: pooledLatency(rounds.map((r) => r.fromCommit)),
    fromBegin: pooledLatency(rounds.map((r) => r.fromBegin)),
  };
}

/** The sizes a latency scenario runs with. */
export type LatencySizes = Pick<
  Sizes,
  'latencySamples' | 'latencyRounds' | 'latencyWarmup' | 'latencyIntervalMs' | 'runTimeoutMs'
>;

/**
 * Each target's start latency from another process, in the sizes' interleaved rounds, pooled over
 * its rounds: one promise per target, rejected with the failure of its failed round.
 */
export async function latencyInRounds(
  targets: readonly LatencyTarget[],
  sizes: LatencySizes,
  server?: ServerCpu,
): Promise<Promise<StartLatency>[]> {
  const perRound = Math.ceil(sizes.latencySamples / sizes.latencyRounds);
  const outcomes = await interleavedRounds(targets, sizes.latencyRounds, (target) =>
    runLatency(target, perRound, sizes.latencyIntervalMs, sizes.latencyWarmup, sizes.runTimeoutMs, server),
  );
  return outcomes.map((outcome) => {
    const pooled = pooledRounds(outcome, pooledStartLatency);
    pooled.catch(() => undefined); // the caller records it as the row's failure
    return pooled;
  });
}
