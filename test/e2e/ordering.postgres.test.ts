import { describeOrderingE2E } from './ordering-suite.js';
import { postgresRuntimeHarness } from './postgres-harness.js';

describeOrderingE2E('postgres', postgresRuntimeHarness, { commands: 1000, keys: 20, workers: 4 });
