import { mysqlRuntimeHarness } from './mysql-harness.js';
import { describeWorkflowsE2E } from './workflows-suite.js';

describeWorkflowsE2E('mysql', mysqlRuntimeHarness);
