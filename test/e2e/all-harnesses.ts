import type { RuntimeHarnessFactory } from './harness.js';
import { mysqlRuntimeHarness } from './mysql-harness.js';
import { postgresRuntimeHarness } from './postgres-harness.js';
import { sqliteRuntimeHarness } from './sqlite-harness.js';

/** Every database's harness with its name, for `describe.each` over the three databases. */
export const RUNTIME_HARNESSES: [string, RuntimeHarnessFactory][] = [
  ['SQLite', sqliteRuntimeHarness as RuntimeHarnessFactory],
  ['PostgreSQL', postgresRuntimeHarness as RuntimeHarnessFactory],
  ['MySQL/MariaDB', mysqlRuntimeHarness as RuntimeHarnessFactory],
];
