export { createSqliteStore, configureConnection } from './store.js';
export type { SqliteCommandStore, SqliteDatabase, SqliteStoreOptions } from './store.js';
