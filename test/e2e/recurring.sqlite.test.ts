import { describeRecurringE2E } from './recurring-suite.js';
import { sqliteRuntimeHarness } from './sqlite-harness.js';

describeRecurringE2E('sqlite', sqliteRuntimeHarness);
