import { createMysqlStore } from '@asynccmd/adapter-mysql';
import type { CommandStore } from '@asynccmd/core';
import { MYSQL_CONFIG } from '../mysql.js';

/** asynccmd's MySQL store on a bench database, with the claim strategy forced. */
export async function openMysqlStore(
  database: string,
  claimStrategy: 'skip-locked' | 'legacy',
  connections: number,
): Promise<CommandStore> {
  return createMysqlStore({
    connection: { ...MYSQL_CONFIG, database },
    connectionLimit: connections,
    claimStrategy,
  });
}
