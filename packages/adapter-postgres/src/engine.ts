// @asynccmd/adapter-postgres/engine: the PostgreSQL engine (its SQL, migrations, row decoding and
// LISTEN/NOTIFY wake-ups) over any connection that provides `PostgresConnection`: what a store on
// another PostgreSQL driver is made of (@asynccmd/adapter-pglite is one). Nothing here loads pg.
export { PostgresEngine, postgresEngineStore } from './store.js';
export type { PostgresEngineParts } from './store.js';
export { arrayLiteral, asText, isTransientSqlState, rolledBackIfAborted } from './connection.js';
export type { PostgresConnection, PostgresStatements, TextRows } from './connection.js';
export { NotifyWakeups } from './notify-wakeups.js';
export type { NotifyWakeupsOptions } from './notify-wakeups.js';
export { tableNames } from './names.js';
export type { TableNames } from './names.js';
