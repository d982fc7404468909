import { availableParallelism, loadavg } from 'node:os';
import { DEFAULT_PROFILES, type DownstreamProfiles } from '../downstream.js';
import { DEMO_RETRY } from '../executors.js';
import type { ProgressBar } from '../load/progress.js';
import { formatMs } from '../stats.js';
import {
  checkCancel,
  checkDownstreamFailure,
  checkKillAfterAcceptance,
  checkProjectionExactlyOnce,
  checkUnknownResponseRetry,
  type CheckResult,
} from './checks.js';
import { experimentPlaces } from './places.js';
import type { ExperimentReport, SweepPoint } from './report.js';
import { runVariant, type VariantResult } from './variant.js';

const callsOf = (v: VariantResult) => Object.values(v.downstreamCalls).reduce((n, d) => n + d.calls, 0);

export interface ExperimentOptions {
  readonly orders: number;
  readonly concurrency: number;
  readonly seed: number;
  /** null: SQLite; or a postgres:// / mysql:// URL (a schema or database of its own per part). */
  readonly db?: string | null;
  /** Prefix of the parts' schemas (kept when given); default a generated one, dropped at the end. */
  readonly schema?: string | null;
  readonly profiles?: DownstreamProfiles;
  readonly progress?: ProgressBar | null;
  /** Rates (orders/s) of the load sweep: both variants, open loop, at each; none by default. */
  readonly sweep?: readonly number[];
  /** How long each rate of the sweep sends for (default 8 s). */
  readonly sweepSeconds?: number;
  /** Called as each stage starts, for a running commentary. */
  readonly onStage?: (stage: string) => void;
}

/**
 * Seed 2 §5: the same request mix and downstream profile against both boundaries, then the five
 * failure checks. Each part works on a database of its own (see places.ts).
 */
export async function runExperiment(options: ExperimentOptions): Promise<ExperimentReport> {
  const places = experimentPlaces(options.db ?? null, options.schema ?? null);
  const place = (part: string) => places.target(part);
  options.onStage?.(
    `databases: ${places.description}${places.kept ? ', kept' : ', dropped at the end (an interrupted run leaves them)'}`,
  );
  const startedAt = new Date().toISOString();
  const profiles = options.profiles ?? DEFAULT_PROFILES;
  try {
    const variants: VariantResult[] = [];
    for (const boundary of ['synchronous', 'split'] as const) {
      options.onStage?.(`variant: ${boundary}`);
      variants.push(
        await runVariant({
          boundary,
          database: place(boundary === 'split' ? 'split' : 'sync'),
          orders: options.orders,
          concurrency: options.concurrency,
          seed: options.seed,
          profiles,
          progress: options.progress ?? null,
        }),
      );
    }
    const checks: CheckResult[] = [];
    const stages: [string, () => Promise<CheckResult>][] = [
      ['check 1: SIGKILL after acceptance, restart', () => checkKillAfterAcceptance(place)],
      ['check 2: downstream fails after acceptance', () => checkDownstreamFailure(place)],
      ['check 3: client retries after an unknown response', () => checkUnknownResponseRetry(place)],
      ['check 4: cancel before / after the irreversible point', () => checkCancel(place)],
      ['check 5: the projection under SIGKILL mid-drain, restart', () => checkProjectionExactlyOnce(place)],
    ];
    for (const [stage, run] of stages) {
      options.onStage?.(stage);
      checks.push(await run());
    }
    const sweep: SweepPoint[] = [];
    const seconds = options.sweepSeconds ?? 8;
    for (const rate of options.sweep ?? []) {
      for (const boundary of ['synchronous', 'split'] as const) {
        options.onStage?.(`sweep: ${boundary} at ${rate} orders/s for ${seconds} s`);
        const v = await runVariant({
          boundary,
          database: place(`r${rate}_${boundary === 'split' ? 'split' : 'sync'}`),
          orders: Math.max(1, Math.round(rate * seconds)),
          concurrency: options.concurrency,
          ratePerSec: rate,
          seed: options.seed,
          profiles,
          progress: options.progress ?? null,
        });
        sweep.push({
          ratePerSec: rate,
          boundary,
          requests: v.requests,
          answeredRatePerSec: v.answeredRatePerSec,
          responseMs: v.responseMs,
          acceptToTerminalMs: v.acceptToTerminalMs,
          completedThroughputPerSec: v.completedThroughputPerSec,
          stillPending: v.stillPending,
          incorrectOrInvisible: v.incorrectOrInvisible.count,
        });
      }
    }
    const [sync, split] = variants as [VariantResult, VariantResult];
    return {
      experimentId: `sync-async-boundary-${startedAt}`,
      startedAt,
      fixedConditions: {
        orders: options.orders,
        concurrency: options.concurrency,
        seed: options.seed,
        requestMix:
          '~85% local stock (201), ~8% made-to-order + ~4% supplier flag (202; 1 in 10 made-to-order too large → rejected), ~3% invalid (400)',
        downstreamBehavior: profiles,
        retries: `maxRetry ${DEMO_RETRY.maxRetry}, backoff ${DEMO_RETRY.backoffBaseMs} ms doubling to ${DEMO_RETRY.backoffCapMs} ms`,
        database: places.description + (places.kept ? ' (kept)' : ''),
        pools:
          'split: IMMEDIATE notification and supplier confirmation in a shared pool of 32, ERP sync in an isolated pool of 16 ' +
          '(the synchronous variant has as many downstream calls in flight as clients: 16)',
        node: process.version,
        // The load generator, the service and the runtime share one Node process on this machine:
        // where the curves bend depends on its cores and on what else runs there.
        machine: { cpus: availableParallelism(), loadAverage1m: Number(loadavg()[0]?.toFixed(2)) },
      },
      variants,
      failureChecks: checks,
      sweep: sweep.length > 0 ? { secondsPerRate: seconds, points: sweep } : null,
      decision: {
        removableCriticalPathTime: `response p95 ${formatMs(sync.responseMs.p95)} → ${formatMs(split.responseMs.p95)}`,
        newConsistencyWindow: `accept→terminal p95 ${formatMs(split.acceptToTerminalMs.p95)}, p99 ${formatMs(split.acceptToTerminalMs.p99)}`,
        acceptedOperationalCost:
          `${split.terminalByState.follow_up_failed ?? 0} operation(s) with a dead letter for a person to retry; ` +
          `${callsOf(split) - callsOf(sync)} more downstream calls than the synchronous variant (it completes more orders, and retries failed calls)`,
      },
    };
  } finally {
    await places.cleanup();
  }
}
