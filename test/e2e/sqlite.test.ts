import { describeRuntimeE2E } from './suite.js';
import { sqliteRuntimeHarness } from './sqlite-harness.js';

// Embedded: no server connection to lose, so the connection-loss test does not apply here.
describeRuntimeE2E('sqlite', sqliteRuntimeHarness, { connections: false });
