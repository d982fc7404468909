import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_PROFILES, type DownstreamProfiles } from '../downstream.js';
import { DEMO_RETRY } from '../executors.js';
import type { ProgressBar } from '../load/progress.js';
import { formatMs } from '../stats.js';
import {
  checkCancel,
  checkDownstreamFailure,
  checkKillAfterAcceptance,
  checkUnknownResponseRetry,
  type CheckResult,
} from './checks.js';
import type { ExperimentReport } from './report.js';
import { runVariant, type VariantResult } from './variant.js';

const callsOf = (v: VariantResult) => Object.values(v.downstreamCalls).reduce((n, d) => n + d.calls, 0);

export interface ExperimentOptions {
  readonly orders: number;
  readonly concurrency: number;
  readonly seed: number;
  readonly profiles?: DownstreamProfiles;
  readonly progress?: ProgressBar | null;
  /** Called as each stage starts, for a running commentary. */
  readonly onStage?: (stage: string) => void;
}

/**
 * Seed 2 §5: the same request mix and downstream profile against both boundaries, then the four
 * failure checks. Each part works on its own SQLite files in a temporary directory.
 */
export async function runExperiment(options: ExperimentOptions): Promise<ExperimentReport> {
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-experiment-'));
  const startedAt = new Date().toISOString();
  const profiles = options.profiles ?? DEFAULT_PROFILES;
  try {
    const variants: VariantResult[] = [];
    for (const boundary of ['synchronous', 'split'] as const) {
      options.onStage?.(`variant: ${boundary}`);
      variants.push(
        await runVariant({
          boundary,
          dir,
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
      ['check 1: SIGKILL after acceptance, restart', () => checkKillAfterAcceptance(dir)],
      ['check 2: downstream fails after acceptance', () => checkDownstreamFailure(dir)],
      ['check 3: client retries after an unknown response', () => checkUnknownResponseRetry(dir)],
      ['check 4: cancel before / after the irreversible point', () => checkCancel(dir)],
    ];
    for (const [stage, run] of stages) {
      options.onStage?.(stage);
      checks.push(await run());
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
        database: 'SQLite (better-sqlite3, WAL), one file per variant',
        pools:
          'split: IMMEDIATE notification and supplier confirmation in a shared pool of 32, ERP sync in an isolated pool of 16 ' +
          '(the synchronous variant has as many downstream calls in flight as clients: 16)',
        node: process.version,
      },
      variants,
      failureChecks: checks,
      decision: {
        removableCriticalPathTime: `response p95 ${formatMs(sync.responseMs.p95)} → ${formatMs(split.responseMs.p95)}`,
        newConsistencyWindow: `accept→terminal p95 ${formatMs(split.acceptToTerminalMs.p95)}, p99 ${formatMs(split.acceptToTerminalMs.p99)}`,
        acceptedOperationalCost:
          `${split.terminalByState.follow_up_failed ?? 0} operation(s) with a dead letter for a person to retry; ` +
          `${callsOf(split) - callsOf(sync)} more downstream calls than the synchronous variant (it completes more orders, and retries failed calls)`,
      },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
