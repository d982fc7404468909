import { describeOrderingE2E } from './ordering-suite.js';
import { sqliteRuntimeHarness } from './sqlite-harness.js';

describeOrderingE2E('sqlite', sqliteRuntimeHarness, { commands: 1000, keys: 20, workers: 4 });
