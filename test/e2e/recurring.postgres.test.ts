import { describeRecurringE2E } from './recurring-suite.js';
import { postgresRuntimeHarness } from './postgres-harness.js';

describeRecurringE2E('postgres', postgresRuntimeHarness);
