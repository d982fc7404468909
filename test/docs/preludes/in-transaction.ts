// `tx`, `id` and `version`: inside a transaction of the `commands` prelude's client.
import type { SqliteDatabase } from '@asynccmd/adapter-sqlite';

export declare const tx: SqliteDatabase;
export const id = 'd-7';
export const version = 3;
