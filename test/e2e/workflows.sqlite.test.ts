import { sqliteRuntimeHarness } from './sqlite-harness.js';
import { describeWorkflowsE2E } from './workflows-suite.js';

describeWorkflowsE2E('sqlite', sqliteRuntimeHarness);
