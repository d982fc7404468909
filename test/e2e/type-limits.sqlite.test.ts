import { describeTypeLimitE2E } from './type-limits-suite.js';
import { sqliteRuntimeHarness } from './sqlite-harness.js';

describeTypeLimitE2E('sqlite', sqliteRuntimeHarness, {
  inserted: 100,
  submittedPerWorker: 25,
  workers: 4,
  limit: 3,
});
