import { describeRecurringE2E } from './recurring-suite.js';
import { mysqlRuntimeHarness } from './mysql-harness.js';

describeRecurringE2E('mysql', mysqlRuntimeHarness);
