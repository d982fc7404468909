export { SqliteCommandStore, createSqliteStore, configureConnection, DEFAULT_TABLE } from './store.js';
export type { SqliteDatabase, SqliteStoreOptions } from './store.js';
export { MIGRATIONS } from './migrations.js';
export type { Migration } from './migrations.js';
export { sqliteSql } from './sql.js';
