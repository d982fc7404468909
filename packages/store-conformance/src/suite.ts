import { describe } from 'vitest';
import type { StoreCapabilityDeclaration, StoreHarnessFactory } from './harness.js';
import { capabilityAreas } from './areas/capabilities.js';
import { adminArea } from './areas/admin.js';
import { claimArea } from './areas/claim.js';
import { cleanupHorizonArea } from './areas/cleanup-horizon.js';
import { dependenciesArea } from './areas/dependencies.js';
import { healthArea } from './areas/health.js';
import { idempotencyArea } from './areas/idempotency.js';
import { idempotentReplaceArea } from './areas/idempotent-replace.js';
import { inputArea } from './areas/input.js';
import { insertArea } from './areas/insert.js';
import { migrationArea } from './areas/migration.js';
import { modelArea } from './areas/model.js';
import { outcomeCountsArea } from './areas/outcome-counts.js';
import { orderingArea } from './areas/ordering.js';
import { outcomesArea } from './areas/outcomes.js';
import { priorityArea } from './areas/priority.js';
import { progressArea } from './areas/progress.js';
import { purgeArea } from './areas/purge.js';
import { readArea } from './areas/read.js';
import { reclaimArea } from './areas/reclaim.js';
import { resultsArea } from './areas/results.js';
import { schedulesArea } from './areas/schedules.js';
import { sqlExecutorArea } from './areas/sql-executor.js';
import { statsArea } from './areas/stats.js';
import { rateLimitsArea } from './areas/rate-limits.js';
import { keyLimitsArea } from './areas/key-limits.js';
import { keyRateLimitsArea } from './areas/key-rate-limits.js';
import { submitWindowsArea } from './areas/submit-windows.js';
import { typeLimitsArea } from './areas/type-limits.js';
import { transactionalCompletionArea } from './areas/transactional-completion.js';
import { typePausesArea } from './areas/type-pauses.js';
import { workflowsArea } from './areas/workflows.js';

export type { StoreCapabilityDeclaration, StoreHarness, StoreHarnessFactory } from './harness.js';

/**
 * The store conformance suite: the executable contract of the store port (core ports/store.ts).
 * Every adapter runs it unchanged against a real database, from one test file:
 *
 *   describeStoreConformance('postgres', postgresHarness, { wakeups: true, commitRiding: true, … });
 *
 * `declared` says which of the capabilities a store may lack this one offers: their areas run, and
 * the others are checked absent. Each area gets its own namespace from the factory, so areas never
 * see each other's rows.
 */
export function describeStoreConformance<Tx>(
  name: string,
  factory: StoreHarnessFactory<Tx>,
  declared: StoreCapabilityDeclaration,
): void {
  describe(`store conformance: ${name}`, () => {
    insertArea(factory, name);
    inputArea(factory, name);
    claimArea(factory, name);
    priorityArea(factory, name);
    orderingArea(factory, name);
    typeLimitsArea(factory, name);
    rateLimitsArea(factory, name);
    keyLimitsArea(factory, name);
    keyRateLimitsArea(factory, name);
    typePausesArea(factory, name);
    outcomesArea(factory, name);
    resultsArea(factory, name);
    progressArea(factory, name);
    transactionalCompletionArea(factory, name);
    sqlExecutorArea(factory, name);
    reclaimArea(factory, name);
    adminArea(factory, name);
    readArea(factory, name);
    statsArea(factory, name);
    healthArea(factory, name);
    cleanupHorizonArea(factory, name, declared.cleanupHorizon);
    outcomeCountsArea(factory, name);
    purgeArea(factory, name);
    idempotencyArea(factory, name);
    idempotentReplaceArea(factory, name);
    submitWindowsArea(factory, name);
    migrationArea(factory, name);
    modelArea(factory, name);
    schedulesArea(factory, name);
    dependenciesArea(factory, name);
    workflowsArea(factory, name);
    capabilityAreas(factory, name, declared);
  });
}
