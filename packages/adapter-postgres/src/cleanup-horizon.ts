import type { CleanupHolder, CleanupHolderKind, CleanupHorizon, CleanupHorizonProbe } from '@asynccmd/core';
import type { PostgresStatements } from './connection.js';
import type { TableNames } from './names.js';

/**
 * What pins the database's xmin horizon for the command table: the oldest snapshot or transaction
 * of another session of this database (or a standby's, through its walsender with
 * `hot_standby_feedback`), a prepared transaction, a replication slot's xmin. Vacuum cannot remove
 * a row version any of them may still see. Ordered by how far back their xmin reaches (age), as
 * vacuum sees it. Seeing other roles' sessions needs `pg_read_all_stats` (or a superuser).
 */
const OLDEST_HOLDER = `
  SELECT kind, held_ms, description FROM (
    SELECT 'transaction' AS kind,
           floor(extract(epoch FROM clock_timestamp() - coalesce(xact_start, query_start)) * 1000)::bigint AS held_ms,
           concat_ws(', ', 'pid ' || pid, 'user ' || usename, 'application ' || quote_literal(nullif(application_name, '')),
                     'from ' || host(client_addr), coalesce(state, backend_type)) AS description,
           age(coalesce(backend_xmin, backend_xid)) AS reach
      FROM pg_stat_activity
     WHERE coalesce(backend_xmin, backend_xid) IS NOT NULL AND pid <> pg_backend_pid()
       AND (datname = current_database() OR backend_type = 'walsender')
    UNION ALL
    SELECT 'prepared-transaction',
           floor(extract(epoch FROM clock_timestamp() - prepared) * 1000)::bigint,
           format('prepared transaction %s of %s', quote_literal(gid), owner),
           age(transaction)
      FROM pg_prepared_xacts WHERE database = current_database()
    UNION ALL
    SELECT 'replication-slot', NULL, format('replication slot %s', quote_literal(slot_name)), age(xmin)
      FROM pg_replication_slots WHERE xmin IS NOT NULL
  ) holders
  ORDER BY reach DESC, held_ms DESC NULLS LAST
  LIMIT 1`;

const DEAD_ROWS = `
  SELECT n_dead_tup::text AS dead,
         floor(extract(epoch FROM greatest(last_vacuum, last_autovacuum)) * 1000)::bigint::text AS vacuumed_ms
    FROM pg_stat_all_tables WHERE relid = to_regclass($1)`;

export function postgresCleanupHorizon(on: PostgresStatements, names: TableNames): CleanupHorizonProbe {
  return {
    async read(): Promise<CleanupHorizon> {
      const [holders, tables] = await Promise.all([
        on.query<{ kind: CleanupHolderKind; held_ms: string | null; description: string }>(OLDEST_HOLDER),
        on.query<{ dead: string; vacuumed_ms: string | null }>(DEAD_ROWS, [names.table]),
      ]);
      const [h] = holders.rows;
      const oldest: CleanupHolder | null = h
        ? {
            kind: h.kind,
            heldForMs: h.held_ms === null ? null : Number(h.held_ms),
            description: h.description,
          }
        : null;
      const [t] = tables.rows;
      return {
        oldest,
        deadRows: t ? Number(t.dead) : null,
        lastCleanupAt: t?.vacuumed_ms ? new Date(Number(t.vacuumed_ms)) : null,
      };
    },
  };
}
