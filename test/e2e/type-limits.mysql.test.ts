import { describeTypeLimitE2E } from './type-limits-suite.js';
import { mysqlRuntimeHarness } from './mysql-harness.js';

describeTypeLimitE2E('mysql', mysqlRuntimeHarness, {
  inserted: 100,
  submittedPerWorker: 25,
  workers: 4,
  limit: 3,
});
