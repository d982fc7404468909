import { postgresRuntimeHarness } from './postgres-harness.js';
import { describeWorkflowsE2E } from './workflows-suite.js';

describeWorkflowsE2E('postgres', postgresRuntimeHarness);
