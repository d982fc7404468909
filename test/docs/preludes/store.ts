// `store`: an SQLite store on app.db (in the run's own directory), migrated.
import * as preludeSqlite from '@asynccmd/adapter-sqlite';

export const store = preludeSqlite.createSqliteStore({ filename: 'app.db' });
await store.migrate();
