import { describeOrderingE2E } from './ordering-suite.js';
import { mysqlRuntimeHarness } from './mysql-harness.js';

describeOrderingE2E('mysql', mysqlRuntimeHarness, { commands: 1000, keys: 20, workers: 4 });
