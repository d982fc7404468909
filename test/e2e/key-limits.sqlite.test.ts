import { describeKeyLimitE2E } from './key-limits-suite.js';
import { sqliteRuntimeHarness } from './sqlite-harness.js';

describeKeyLimitE2E('sqlite', sqliteRuntimeHarness, {
  workers: 4,
  big: 50_000,
  smallTenants: 20,
  perSmallTenant: 10,
  customers: 5,
  perCustomerCommands: 20,
  perCustomer: 2,
});
