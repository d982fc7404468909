import { describeRuntimeE2E } from './suite.js';
import { postgresRuntimeHarness } from './postgres-harness.js';

describeRuntimeE2E('postgres', postgresRuntimeHarness, { connections: true });
