import { describeKeyLimitE2E } from './key-limits-suite.js';
import { mysqlRuntimeHarness } from './mysql-harness.js';

describeKeyLimitE2E('mysql', mysqlRuntimeHarness, {
  workers: 4,
  big: 50_000,
  smallTenants: 20,
  perSmallTenant: 10,
  customers: 5,
  perCustomerCommands: 20,
  perCustomer: 2,
});
