import { describeRuntimeE2E } from './suite.js';
import { mysqlRuntimeHarness } from './mysql-harness.js';

describeRuntimeE2E('mysql', mysqlRuntimeHarness, { connections: true });
