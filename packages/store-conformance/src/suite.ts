import { describe } from 'vitest';
import type { StoreHarnessFactory } from './harness.js';
import { adminArea } from './areas/admin.js';
import { claimArea } from './areas/claim.js';
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
import { purgeArea } from './areas/purge.js';
import { readArea } from './areas/read.js';
import { reclaimArea } from './areas/reclaim.js';
import { resultsArea } from './areas/results.js';
import { schedulesArea } from './areas/schedules.js';
import { statsArea } from './areas/stats.js';
import { typeLimitsArea } from './areas/type-limits.js';
import { typePausesArea } from './areas/type-pauses.js';

export type { StoreHarness, StoreHarnessFactory } from './harness.js';

/**
 * The store conformance suite: the executable contract of the store port (core ports/store.ts).
 * Every adapter runs it unchanged against a real database, from one test file:
 *
 *   describeStoreConformance('postgres', postgresHarness);
 *
 * Each area gets its own namespace from the factory, so areas never see each other's rows.
 */
export function describeStoreConformance<Tx>(name: string, factory: StoreHarnessFactory<Tx>): void {
  describe(`store conformance: ${name}`, () => {
    insertArea(factory, name);
    inputArea(factory, name);
    claimArea(factory, name);
    priorityArea(factory, name);
    orderingArea(factory, name);
    typeLimitsArea(factory, name);
    typePausesArea(factory, name);
    outcomesArea(factory, name);
    resultsArea(factory, name);
    reclaimArea(factory, name);
    adminArea(factory, name);
    readArea(factory, name);
    statsArea(factory, name);
    healthArea(factory, name);
    outcomeCountsArea(factory, name);
    purgeArea(factory, name);
    idempotencyArea(factory, name);
    idempotentReplaceArea(factory, name);
    migrationArea(factory, name);
    modelArea(factory, name);
    schedulesArea(factory, name);
  });
}
