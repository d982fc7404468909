// @asynccmd/store-conformance: the contract every CommandStore adapter is held to, as vitest suites
// an adapter's own test file runs against its own database.
export { describeStoreConformance } from './suite.js';
export type { StoreCapabilityDeclaration, StoreHarness, StoreHarnessFactory } from './harness.js';
