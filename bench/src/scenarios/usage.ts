import type { CommandStore } from '@asynccmd/core';
import { BENCH_TYPE, type FlowUsage } from '../protocol.js';
import type { Measurement } from '../report.js';
import type { Target } from '../stats.js';
import { findRow, shapeLabel, shapesOf, type DrainRow } from './drain-rows.js';
import type { Recorder } from './recorder.js';
import type { Sizes } from './sizes.js';
import { CHAINS_PER_WORKFLOW, submitBatch, submitWorkflowGraph } from './workflows.js';

/**
 * Drains with a feature of the command table in use, set on the seeded backlog by one UPDATE (the
 * seed itself stays the baselines' raw insert): priorities spread over PRIORITY_LEVELS values, or
 * ordering keys spread over ORDERING_KEYS keys (each key's commands then run one after another); or
 * a type limit of TYPE_LIMIT on the drained type, set by the consumers' runtime option, so large it
 * never holds a claim back: what it costs is its lock and count on every claim. Or workflows, whose
 * backlog is submitted through the client (workflows.ts; the warm-up before it stays the raw
 * insert): a workflow graph, the drain's commands as chains of three (each step after a chain's
 * first WAITING for the one before it), a three-level graph whose every completion releases the
 * next step in its transaction; or a batch callback, one batch of `batchMembers` members and a
 * callback that waits for them all.
 * The flow limits (docs/flow-control.md), each against the defaults' drain of the same repeat: a
 * rate limit never reached (its take and give-back on every claim round), fair share across
 * FLOW_KEYS tenants, and a limit of KEY_MAX_RUNNING running per tenant over them (the tenant in the
 * payload and its key set by the seed's UPDATE, as a submit would key it).
 */
export type FeatureUsage =
  'priorities' | 'ordering keys' | 'type limit' | 'workflow graph' | 'batch callback' | FlowUsage;

/** Every usage with its row key, in the order the rows are reported. */
export const FEATURE_USAGES = [
  ['priorities', 'priorities'],
  ['ordering keys', 'ordering-keys'],
  ['type limit', 'type-limit'],
  ['workflow graph', 'workflow-graph'],
  ['batch callback', 'batch-callback'],
  ['rate limit', 'rate-limit'],
  ['fair share', 'fair-share'],
  ['key limit', 'key-limit'],
] as const satisfies readonly (readonly [FeatureUsage, string])[];

/** The usages whose rows are set against the plain drain with a target (WORKFLOW_TARGET on PostgreSQL). */
export const WORKFLOW_USAGES = FEATURE_USAGES.filter(
  ([usage]) => usage === 'workflow graph' || usage === 'batch callback',
);

/** The workflow rows' target on PostgreSQL: at least this share of the plain drain's jobs/s. */
export const WORKFLOW_TARGET = 0.7;

/**
 * The workflow rows of a shape (`rowOf` their keys) against the plain drain of the same shape and
 * run (`plain`, named `plainLabel`), with WORKFLOW_TARGET where `targeted` (PostgreSQL), else for
 * information.
 */
export function workflowRatios(
  rec: Recorder,
  section: string,
  shape: string,
  rowOf: (key: FeatureUsageKey) => Measurement | undefined,
  plain: Measurement | undefined,
  plainLabel: string,
  targeted: boolean,
): void {
  for (const [usage, key] of WORKFLOW_USAGES) {
    const ours = rowOf(key);
    if (ours && plain)
      rec.ratio(section, `asynccmd, ${usage} / ${plainLabel}, ${shape}`, ours, plain, {
        ...(targeted ? { atLeast: WORKFLOW_TARGET } : {}),
      });
  }
}

/**
 * How many commands a drain with `usage` times, when not the run's drainTotal: the batch and its
 * callback.
 */
export function usageTotal(usage: FeatureUsage, sizes: Sizes): number | undefined {
  return usage === 'batch callback' ? sizes.batchMembers + 1 : undefined;
}

/**
 * How a drain with `usage` submits its timed commands (seqs firstSeq … firstSeq + count − 1)
 * through the client on the store `open` gives; null when the seed is the raw insert.
 */
export function usageSubmit(
  usage: FeatureUsage | undefined,
):
  | ((open: () => CommandStore | Promise<CommandStore>, firstSeq: number, count: number) => Promise<void>)
  | null {
  if (usage === 'workflow graph') return submitWorkflowGraph;
  if (usage === 'batch callback') return submitBatch;
  return null;
}

export type FeatureUsageKey = (typeof FEATURE_USAGES)[number][1];

export const PRIORITY_LEVELS = 10;
export const ORDERING_KEYS = 200;
export const TYPE_LIMIT = 10_000;
export const FLOW_KEYS = 1_000;
export const KEY_MAX_RUNNING = 2;
/** A rate limit the drain never reaches: 1,000,000 starts a second (burst 100,000). */
export const RATE_LIMIT = { maxStarts: 1_000_000, periodMs: 1_000 } as const;

/** What a flow usage's drain is held to, as a ratio to the defaults' drain of the same repeat. */
export const FLOW_TARGETS: Readonly<Record<FlowUsage, Target>> = {
  'rate limit': { atLeast: 0.8 },
  'fair share': { atLeast: 0.5 },
  'key limit': { atLeast: 0.5 },
};

/** The flow usage among the usages, or undefined. */
export function flowUsage(usage: FeatureUsage | undefined): FlowUsage | undefined {
  return usage === 'rate limit' || usage === 'fair share' || usage === 'key limit' ? usage : undefined;
}

/** The `typeLimit` a consumer's runtime takes with `usage` (undefined: none). */
export function usageTypeLimit(usage: FeatureUsage | undefined): number | undefined {
  return usage === 'type limit' ? TYPE_LIMIT : undefined;
}

/** The settings text of a drain row with `usage` (its executor runs ASYNC_POOL, as the defaults row's). */
export function usageSettings(usage: FeatureUsage): string {
  return `executor mode ASYNC_POOL; ${usageDescription(usage)}`;
}

/** What the row does with `usage`, on top of the runtime's defaults. */
function usageDescription(usage: FeatureUsage): string {
  if (usage === 'type limit') {
    return `runtime defaults and typeLimits { '${BENCH_TYPE}': ${TYPE_LIMIT} }: never reached, every claim locks the type's limit row and counts its RUNNING commands first`;
  }
  if (usage === 'rate limit') {
    return `runtime defaults and rateLimits { '${BENCH_TYPE}': { maxStarts: ${RATE_LIMIT.maxStarts}, periodMs: ${RATE_LIMIT.periodMs} } }: never reached, every claim round takes its tokens first and gives back what it did not use`;
  }
  if (usage === 'fair share') {
    return `runtime defaults and fairShare { '${BENCH_TYPE}': { key: 'tenant' } }; backlog over ${FLOW_KEYS} tenants (tenant = id mod ${FLOW_KEYS}): each claim takes turns across them`;
  }
  if (usage === 'key limit') {
    return `runtime defaults and keyLimits { '${BENCH_TYPE}': { key: 'tenant', maxRunning: ${KEY_MAX_RUNNING} } }; backlog over ${FLOW_KEYS} tenants (tenant = id mod ${FLOW_KEYS})`;
  }
  if (usage === 'workflow graph') {
    return `runtime defaults; the timed commands submitted through client.workflow() as chains of 3 (a 3-level graph), ${CHAINS_PER_WORKFLOW} chains a workflow: two thirds WAITING for the step before them, each released by its dependency's completion`;
  }
  if (usage === 'batch callback') {
    return "runtime defaults; the timed commands one batch, in one transaction: its members by client.submitMany, and a callback by client.workflow() waiting for every member (onFailure 'continue'), released by the last member's completion";
  }
  return usage === 'priorities'
    ? `runtime defaults; backlog spread over priorities 0–${PRIORITY_LEVELS - 1} (priority = id mod ${PRIORITY_LEVELS})`
    : `runtime defaults; backlog spread over ${ORDERING_KEYS} ordering keys (key = id mod ${ORDERING_KEYS}): each key's commands one at a time, a freed key waits for the next claim round`;
}

/** How a database writes what the usages need (dialects differ). */
export interface UsageDialect {
  /** SQL text `a` followed by `b`. */
  readonly concat: (a: string, b: string) => string;
  /** The JSON `payload` with its top-level `field` set to the text `value` (SQL expressions). */
  readonly withField: (payload: string, field: string, value: string) => string;
}

export const PG_USAGE: UsageDialect = {
  concat: (a, b) => `${a} || (${b})::text`,
  withField: (payload, field, value) =>
    `(${payload}::jsonb || jsonb_build_object('${field}', ${value}))::json`,
};
export const MYSQL_USAGE: UsageDialect = {
  concat: (a, b) => `CONCAT(${a}, ${b})`,
  withField: (payload, field, value) => `JSON_SET(${payload}, '$.${field}', ${value})`,
};
export const SQLITE_USAGE: UsageDialect = {
  concat: (a, b) => `${a} || (${b})`,
  withField: (payload, field, value) => `json_set(${payload}, '$.${field}', ${value})`,
};

/**
 * The statements that put `usage` on the table `table`; none when the usage is not in the table
 * (a type limit and a rate limit are the consumers' options).
 */
export function usageUpdates(
  table: string,
  usage: FeatureUsage | undefined,
  dialect: UsageDialect,
): string[] {
  const { concat } = dialect;
  if (usage === undefined || usage === 'type limit' || usage === 'rate limit' || usageSubmit(usage) !== null)
    return [];
  if (usage === 'fair share' || usage === 'key limit') {
    // The tenant in the payload, and its key as the store's insert would have written it.
    const tenant = concat(`'t-'`, `id % ${FLOW_KEYS}`);
    return [
      `UPDATE ${table} SET payload = ${dialect.withField('payload', 'tenant', tenant)}, flow_key = ${tenant}`,
    ];
  }
  if (usage === 'priorities') return [`UPDATE ${table} SET priority = id % ${PRIORITY_LEVELS}`];
  return [`UPDATE ${table} SET ordering_key = ${concat(`'key-'`, `id % ${ORDERING_KEYS}`)}`];
}

/**
 * The flow usages' drains against the defaults' drain (`defaults`, labelled `defaultsLabel`) of
 * the same shape, repeat by repeat, each with its FLOW_TARGETS.
 */
export function flowRatios<S extends string>(
  rec: Recorder,
  section: string,
  drains: readonly DrainRow<S>[],
  defaults: S,
  defaultsLabel: string,
): void {
  for (const shape of shapesOf(drains)) {
    const base = findRow(drains, defaults, shape);
    for (const [usage, key] of FEATURE_USAGES) {
      const flow = flowUsage(usage);
      const row = findRow(drains, key as S, shape);
      if (flow === undefined || row === undefined || base === undefined) continue;
      rec.ratio(
        section,
        `asynccmd, ${usage} in use / ${defaultsLabel}, ${shapeLabel(shape)}`,
        row,
        base,
        FLOW_TARGETS[flow],
      );
    }
  }
}
