import type { CleanupHorizon, CleanupHorizonProbe } from '@asynccmd/core';
import type { Pool } from 'mysql2/promise';
import { select } from './connection.js';

/**
 * InnoDB cannot purge a row version an open transaction's read view may still need: the oldest
 * transaction of another session (an analytics query, a session left in a transaction) holds
 * purge back for every table of the server, and the undo history grows meanwhile (its length is
 * InnoDB's `trx_rseg_history_len`). Reading other sessions' transactions needs the PROCESS
 * privilege.
 */
const OLDEST_TRANSACTION = `
  SELECT t.trx_mysql_thread_id AS thread,
         CAST(TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)) DIV 1000 AS CHAR) AS held_ms,
         p.USER AS user, p.HOST AS host, p.DB AS db, p.COMMAND AS command, t.trx_state AS state
    FROM information_schema.INNODB_TRX t
    LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
   WHERE t.trx_mysql_thread_id <> CONNECTION_ID()
   ORDER BY t.trx_started, t.trx_mysql_thread_id
   LIMIT 1`;

const HISTORY_LENGTH = `
  SELECT CAST(COUNT AS CHAR) AS length, ENABLED AS enabled
    FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'`;

interface TransactionRow {
  readonly thread: number | string;
  readonly held_ms: string | null;
  readonly user: string | null;
  readonly host: string | null;
  readonly db: string | null;
  readonly command: string | null;
  readonly state: string | null;
}

export function mysqlCleanupHorizon(pool: Pool): CleanupHorizonProbe {
  return {
    async read(): Promise<CleanupHorizon> {
      const [transactions, history] = await Promise.all([
        select<TransactionRow>(pool, OLDEST_TRANSACTION),
        select<{ length: string; enabled: number | string }>(pool, HISTORY_LENGTH),
      ]);
      const [t] = transactions;
      const [h] = history;
      return {
        oldest: t
          ? {
              kind: 'transaction',
              heldForMs: t.held_ms === null ? null : Math.max(0, Number(t.held_ms)),
              description: [
                `thread ${t.thread}`,
                t.user && t.host ? `user ${t.user}@${t.host}` : null,
                t.db ? `database ${t.db}` : null,
                t.command ? t.command.toLowerCase() : null,
                t.state ? `transaction ${t.state.toLowerCase()}` : null,
              ]
                .filter((part) => part !== null)
                .join(', '),
            }
          : null,
        deadRows: h && Number(h.enabled) === 1 ? Number(h.length) : null,
        lastCleanupAt: null,
      };
    },
  };
}
