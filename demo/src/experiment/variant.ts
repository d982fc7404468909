import type { DatabaseTarget } from '../db/database.js';
import type { DownstreamProfiles } from '../downstream.js';
import { runLoad } from '../load/run-load.js';
import type { ProgressBar } from '../load/progress.js';
import { startDemoService } from '../service.js';
import { percentiles, type Percentiles } from '../stats.js';
import { countOf } from './observe.js';

export type Boundary = 'synchronous' | 'split';

export interface VariantResult {
  readonly boundary: Boundary;
  readonly requests: number;
  readonly responseMs: Percentiles;
  /** HTTP status → count, e.g. { "201": 250, "502": 40 }. */
  readonly responses: Record<string, number>;
  /** Operations the API said yes to (201 or 202). */
  readonly acceptedOperations: number;
  readonly terminalByState: Record<string, number>;
  /** Accepted operations not terminal when the run stopped waiting. */
  readonly stillPending: number;
  /** Completed operations per second, from the first request to the last terminal state. */
  readonly completedThroughputPerSec: number;
  readonly acceptToTerminalMs: Percentiles;
  /** Age of unfinished operations, sampled every 200 ms. */
  readonly pendingAgeMs: Percentiles;
  /** Orders that exist although the client was told the request failed, or accepted work nobody can see finish. */
  readonly incorrectOrInvisible: { readonly count: number; readonly evidence: string };
  readonly downstreamCalls: Record<string, { calls: number; failures: number }>;
  /** Side effects delivered more than once (at-least-once made visible; the downstream dedups by key). */
  readonly duplicateDeliveries: number;
  readonly wallMs: number;
  /** Open-loop runs (the sweep): the arrival rate asked for, and the answers per second it came to. */
  readonly offeredRatePerSec: number | null;
  readonly answeredRatePerSec: number;
  /** Every response time and every accept → terminal time, in ms (for the pictures). */
  readonly samples: {
    readonly responseMs: readonly number[];
    readonly acceptToTerminalMs: readonly number[];
  };
}

export interface VariantOptions {
  readonly boundary: Boundary;
  /** A database of this run's own. */
  readonly database: DatabaseTarget;
  readonly orders: number;
  readonly concurrency: number;
  /** Open loop at this rate (orders/s) instead of `concurrency` closed-loop clients. */
  readonly ratePerSec?: number;
  readonly seed: number;
  readonly profiles: DownstreamProfiles;
  readonly progress?: ProgressBar | null;
  readonly settleTimeoutMs?: number;
}

/**
 * Runs the request mix against one boundary on a database of its own and measures it (seed 2, §5):
 * the response side and the completion side, since moving work out of the response is only a
 * gain if the accepted operations still reach their terminal states.
 */
export async function runVariant(o: VariantOptions): Promise<VariantResult> {
  const service = await startDemoService({
    database: o.database,
    boundary: o.boundary,
    profiles: o.profiles,
    seed: o.seed,
  });
  try {
    const run = await runLoad({
      baseUrl: service.url,
      read: (ids) => service.boundary.operations(ids),
      orders: o.orders,
      concurrency: o.concurrency,
      ratePerSec: o.ratePerSec,
      seed: o.seed,
      runId: `exp-${o.boundary}`,
      progress: o.progress ?? null,
      label:
        (o.boundary === 'split' ? 'split       ' : 'synchronous ') +
        (o.ratePerSec === undefined ? '' : `${o.ratePerSec}/s `),
      settleTimeoutMs: o.settleTimeoutMs,
    });
    const responses: Record<string, number> = {};
    for (const s of run.sent) responses[String(s.status)] = (responses[String(s.status)] ?? 0) + 1;
    const terminalByState: Record<string, number> = {};
    for (const op of run.tracker.operations.values()) {
      if (op.terminalAt !== null) terminalByState[op.state] = (terminalByState[op.state] ?? 0) + 1;
    }
    const stillPending = run.tracker.unfinished().length;
    const lastTerminal = Math.max(0, ...[...run.tracker.operations.values()].map((op) => op.terminalAt ?? 0));
    const firstAccepted = Math.min(...[...run.tracker.operations.values()].map((op) => op.acceptedAt));
    const db = service.db.session;
    const hidden = await countOf(db, 'SELECT COUNT(*) AS n FROM orders WHERE inline_failure IS NOT NULL');
    const duplicates = await countOf(db, 'SELECT COUNT(*) AS n FROM downstream_call WHERE calls > 1');
    const completed = terminalByState.completed ?? 0;
    const completionWindowMs = Math.max(run.sendingMs, lastTerminal - firstAccepted);
    return {
      boundary: o.boundary,
      requests: run.sent.length,
      responseMs: percentiles(run.sent.map((s) => s.latencyMs)),
      responses,
      acceptedOperations: run.tracker.operations.size,
      terminalByState,
      stillPending,
      completedThroughputPerSec: completionWindowMs > 0 ? (completed * 1000) / completionWindowMs : 0,
      acceptToTerminalMs: percentiles(run.tracker.acceptToTerminalMs()),
      pendingAgeMs: percentiles(run.tracker.pendingAges),
      incorrectOrInvisible:
        o.boundary === 'synchronous'
          ? {
              count: hidden,
              evidence: `${hidden} order(s) were recorded but their request answered 502 (a downstream failed after the insert): the client believes there is no order`,
            }
          : {
              count: stillPending,
              evidence:
                stillPending === 0
                  ? 'every accepted operation reached a terminal state visible at its status URI; dead letters show in /health'
                  : `${stillPending} accepted operation(s) were not terminal when the run stopped waiting`,
            },
      downstreamCalls: Object.fromEntries(
        Object.entries(service.downstreams).map(([name, d]) => [
          name,
          { calls: d.calls, failures: d.failures },
        ]),
      ),
      duplicateDeliveries: duplicates,
      wallMs: run.settledMs,
      offeredRatePerSec: o.ratePerSec ?? null,
      answeredRatePerSec: run.sendingMs > 0 ? (run.sent.length * 1000) / run.sendingMs : 0,
      samples: {
        responseMs: run.sent.map((s) => round1(s.latencyMs)),
        acceptToTerminalMs: run.tracker.acceptToTerminalMs(),
      },
    };
  } finally {
    await service.close();
  }
}

const round1 = (ms: number) => Math.round(ms * 10) / 10;
