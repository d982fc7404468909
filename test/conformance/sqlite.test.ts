import { describeStoreConformance } from './suite.js';
import { sqliteHarness } from './sqlite-harness.js';

describeStoreConformance('sqlite', sqliteHarness);
