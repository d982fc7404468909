import { describeRuntimeE2E } from './suite.js';
import { sqliteRuntimeHarness } from './sqlite-harness.js';

describeRuntimeE2E('sqlite', sqliteRuntimeHarness);
