import type Database from 'better-sqlite3';
import {
  DEPENDENCY_CANCELLED_ERROR,
  dependencyOutcomes,
  EDGE_BLOCKED,
  EDGE_OPEN,
  EDGE_SATISFIED,
  workflowEdgesFromRows,
} from '@asynccmd/core/store-kit';
import type { DependencyEngine, DependencyRow, WorkflowEdgeRow } from '@asynccmd/core/store-kit';
import { InvalidArgumentError } from '@asynccmd/core';
import type * as Port from '@asynccmd/core';
import { DB_NOW } from './sql.js';

/*
 * Dependencies on SQLite (core ports/dependencies.ts, store-kit dependencies.ts). As on
 * PostgreSQL, the release of dependants is written by triggers on the command table, so every
 * terminal transition settles its dependants in its own statement's transaction and the store's
 * statements stay as they are. A cancelled dependant is a terminal transition too and fires the
 * triggers again: the cascade needs `PRAGMA recursive_triggers = ON` on the connection that writes
 * (the store sets it on its handle; see docs/workflows.md).
 */

/** The CHECK of migration 1, and the one that admits WAITING. */
const OLD_CHECK = `CHECK (status IN ('PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED'))`;
const NEW_CHECK = `CHECK (status IN ('WAITING', 'PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED'))`;

const sqlText = (text: string): string => `'${text.replaceAll("'", "''")}'`;

/**
 * Widens the status CHECK in place: SQLite cannot alter a constraint, and a wider CHECK admits
 * every existing row, which is the case SQLite documents for editing the schema text (writable_schema)
 * instead of copying the table. Needs a connection without SQLITE_DBCONFIG_DEFENSIVE (runMigrations
 * lifts it for this version; the sqlite3 shell has it off).
 */
export function widenStatusCheck(t: string): string[] {
  return [
    `PRAGMA writable_schema = ON`,
    `UPDATE sqlite_schema SET sql = replace(sql, ${sqlText(OLD_CHECK)}, ${sqlText(NEW_CHECK)})
       WHERE type = 'table' AND name = ${sqlText(t)}`,
    // Off again, and this connection rereads the schema (the DDL that follows bumps schema_version
    // for the others).
    `PRAGMA writable_schema = RESET`,
  ];
}

/**
 * The statements of the settle triggers, by the change they settle, each naming the changed
 * command as `NEW.id`. Each dependant with an edge of NEW in the state settled takes its new
 * counters and the status they call for in one write of its row — cancelled (a blocking
 * dependency), released (none left), revived (cancelled by a dependency, no longer blocked) or as
 * it was — read from its edge (one lookup of the edge's key) before the edges move. The command
 * table is reached only by its rowid: a condition on `status` in the WHERE could lead the planner
 * to the status index and through every WAITING row.
 */
export function settleStatements(t: string): Record<'success' | 'failure' | 'revival', string[]> {
  const deps = `${t}_dependencies`;
  const ofNew = (state: string): string => `WHERE dependency_id = NEW.id AND ${state}`;
  /** The dependants of NEW's edges in `state`; `dw`, `db`: their counters' changes, over its edge `s`. */
  const move = (state: string, dw: string, db: string): string => {
    const w = `${t}.waiting_for + ${dw}`;
    const b = `${t}.blocked_by + ${db}`;
    const cancel = `(${t}.status = 'WAITING' AND ${b} > 0)`;
    const release = `(${t}.status = 'WAITING' AND ${b} = 0 AND ${w} = 0)`;
    const revive = `(${t}.status = 'CANCELLED' AND ${t}.dependency_cancelled = 1 AND ${b} = 0)`;
    // SQLite reads the row as it was in every expression of the SET.
    return `UPDATE ${t} SET (waiting_for, blocked_by, status, next_run_at, dependency_cancelled, finished_at,
        last_error, updated_at) = (SELECT ${w}, ${b},
      CASE WHEN ${cancel} THEN 'CANCELLED' WHEN ${release} THEN 'PENDING'
        WHEN ${revive} THEN CASE WHEN ${w} = 0 THEN 'PENDING' ELSE 'WAITING' END ELSE ${t}.status END,
      CASE WHEN ${release} OR (${revive} AND ${w} = 0) THEN max(${t}.next_run_at, ${DB_NOW})
        ELSE ${t}.next_run_at END,
      CASE WHEN ${cancel} THEN 1 WHEN ${revive} THEN 0 ELSE ${t}.dependency_cancelled END,
      CASE WHEN ${cancel} THEN ${DB_NOW} WHEN ${revive} THEN NULL ELSE ${t}.finished_at END,
      CASE WHEN ${cancel} THEN ${sqlText(DEPENDENCY_CANCELLED_ERROR)} WHEN ${revive} THEN NULL
        ELSE ${t}.last_error END,
      CASE WHEN ${cancel} OR ${release} OR ${revive} THEN ${DB_NOW} ELSE ${t}.updated_at END
      FROM ${deps} AS s WHERE s.dependency_id = NEW.id AND s.dependant_id = ${t}.id)
    WHERE id IN (SELECT dependant_id FROM ${deps} ${ofNew(state)})`;
  };
  const unsettled = `state IN (${EDGE_OPEN}, ${EDGE_BLOCKED})`;
  const open = `state = ${EDGE_OPEN}`;
  const blocked = `state = ${EDGE_BLOCKED}`;
  return {
    success: [
      move(unsettled, '-1', `(CASE WHEN s.state = ${EDGE_BLOCKED} THEN -1 ELSE 0 END)`),
      `UPDATE ${deps} SET state = ${EDGE_SATISFIED} ${ofNew(unsettled)}`,
    ],
    failure: [
      move(
        open,
        `(CASE WHEN s.on_failure = 'continue' THEN -1 ELSE 0 END)`,
        `(CASE WHEN s.on_failure = 'cancel' THEN 1 ELSE 0 END)`,
      ),
      `UPDATE ${deps} SET state = CASE WHEN on_failure = 'continue' THEN ${EDGE_SATISFIED} ELSE ${EDGE_BLOCKED} END
        ${ofNew(open)}`,
    ],
    revival: [move(blocked, '0', '-1'), `UPDATE ${deps} SET state = ${EDGE_OPEN} ${ofNew(blocked)}`],
  };
}

/**
 * The settle triggers: a terminal transition (or a revival) of a command marked `has_dependants`
 * settles its edges and dependants in its own statement's transaction; a dependant it cancels or
 * revives fires them in turn (the cascade).
 */
export function settleTriggersDdl(t: string): string[] {
  const statements = settleStatements(t);
  const trigger = (name: string, when: string, body: readonly string[]): string[] => [
    `DROP TRIGGER IF EXISTS ${t}_${name}`,
    `CREATE TRIGGER ${t}_${name} AFTER UPDATE OF status ON ${t}
     WHEN NEW.has_dependants = 1 AND ${when}
     BEGIN ${body.map((s) => `${s};`).join('\n')}
     END`,
  ];
  return [
    ...trigger('settle_success', `NEW.status = 'SUCCESS' AND OLD.status <> 'SUCCESS'`, statements.success),
    ...trigger(
      'settle_failure',
      `NEW.status IN ('DEAD', 'CANCELLED') AND OLD.status NOT IN ('DEAD', 'CANCELLED')`,
      statements.failure,
    ),
    ...trigger(
      'settle_revival',
      `OLD.status = 'CANCELLED' AND NEW.status IN ('WAITING', 'PENDING')`,
      statements.revival,
    ),
  ];
}

/** Migration 16 past the CHECK: the counters, the edges, the workflows, the triggers. */
export function dependenciesDdl(t: string): string[] {
  const deps = `${t}_dependencies`;
  return [
    `ALTER TABLE ${t} ADD COLUMN waiting_for INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE ${t} ADD COLUMN blocked_by INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE ${t} ADD COLUMN has_dependants INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE ${t} ADD COLUMN dependency_cancelled INTEGER NOT NULL DEFAULT 0`,
    `CREATE TABLE IF NOT EXISTS ${deps} (
       dependency_id INTEGER NOT NULL,
       dependant_id  INTEGER NOT NULL,
       on_failure    TEXT    NOT NULL CHECK (on_failure IN ('cancel', 'continue')),
       state         INTEGER NOT NULL,
       PRIMARY KEY (dependency_id, dependant_id)
     ) WITHOUT ROWID`,
    `CREATE INDEX IF NOT EXISTS ${deps}_dependant ON ${deps} (dependant_id)`,
    `CREATE TABLE IF NOT EXISTS ${t}_workflow_steps (
       workflow_id TEXT    NOT NULL,
       step        TEXT    NOT NULL,
       command_id  INTEGER NOT NULL,
       position    INTEGER NOT NULL,
       PRIMARY KEY (workflow_id, step)
     )`,
    ...settleTriggersDdl(t),
  ];
}

/**
 * The dependency engine of a SQLite store: a waiting submit on the caller's handle (the store's
 * own, in its transaction), reads on the store's handle (`run` queues them as the store's own).
 */
export function sqliteDependencyEngine(
  db: Database.Database,
  t: string,
  run: <T>(op: () => T) => Promise<T>,
): DependencyEngine<Database.Database> {
  const deps = `${t}_dependencies`;
  return {
    // The caller's transaction holds the database's one write lock: nothing else moves these rows.
    lock: async (conn, ids) => {
      const rows = conn
        .prepare(
          `SELECT CAST(id AS TEXT) AS id, status FROM ${t} WHERE id IN (SELECT value FROM json_each(:ids))
           UNION ALL
           SELECT CAST(id AS TEXT) AS id, status FROM ${t}_history WHERE id IN (SELECT value FROM json_each(:ids))`,
        )
        .all({ ids: `[${ids.join(',')}]` }) as { id: string; status: Port.CommandStatus }[];
      return new Map(rows.map((r) => [r.id, r.status]));
    },
    mark: async (conn, ids) => {
      conn
        .prepare(
          `UPDATE ${t} SET has_dependants = 1 WHERE id IN (SELECT value FROM json_each(?)) AND has_dependants = 0`,
        )
        .run(`[${ids.join(',')}]`);
    },
    insertEdges: async (conn, edges) => {
      conn
        .prepare(
          `INSERT INTO ${deps} (dependency_id, dependant_id, on_failure, state)
               SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?)`,
        )
        .run(JSON.stringify(edges.map((e) => [e.dependency, e.dependant, e.onFailure, e.state])));
    },
    hold: async (conn, holds) => {
      conn
        .prepare(
          `UPDATE ${t} SET status = h.value ->> 1, waiting_for = h.value ->> 2, blocked_by = h.value ->> 3,
                 dependency_cancelled = (h.value ->> 1 = 'CANCELLED'),
                 finished_at = CASE WHEN h.value ->> 1 = 'CANCELLED' THEN ${DB_NOW} END,
                 last_error = CASE WHEN h.value ->> 1 = 'CANCELLED' THEN ? END
               FROM json_each(?) AS h WHERE ${t}.id = h.value ->> 0`,
        )
        .run(
          DEPENDENCY_CANCELLED_ERROR,
          JSON.stringify(holds.map((h) => [h.id, h.status, h.waitingFor, h.blockedBy])),
        );
    },
    dependenciesOf: (id) => {
      const key = BigInt(id);
      return run(() => {
        const rows = db
          .prepare(
            `SELECT CAST(c.id AS TEXT) AS id, c.type, c.status, d.on_failure, c.result
             FROM ${deps} AS d
               JOIN (SELECT id, type, status, result FROM ${t}
                     UNION ALL SELECT id, type, status, result FROM ${t}_history) AS c ON c.id = d.dependency_id
             WHERE d.dependant_id = ?`,
          )
          .all(key) as DependencyRow[];
        return dependencyOutcomes(rows, (text) => JSON.parse(String(text)) as unknown);
      });
    },
    recordWorkflow: async (tx, workflowId, steps) => {
      const checked = { workflowId, steps };
      const taken = tx
        .prepare(`SELECT 1 FROM ${t}_workflow_steps WHERE workflow_id = ? LIMIT 1`)
        .get(checked.workflowId);
      if (taken !== undefined)
        throw new InvalidArgumentError(`workflow ${JSON.stringify(checked.workflowId)} exists already`);
      tx.prepare(
        `INSERT INTO ${t}_workflow_steps (workflow_id, step, command_id, position)
         SELECT ?, value ->> 0, value ->> 1, key FROM json_each(?)`,
      ).run(checked.workflowId, JSON.stringify(checked.steps.map((s) => [s.name, s.id])));
    },
    workflowOf: (id) => {
      const key = BigInt(id);
      return run(
        () =>
          (db
            .prepare(
              `SELECT workflow_id AS workflowId, step FROM ${t}_workflow_steps
               WHERE command_id = ? ORDER BY workflow_id LIMIT 1`,
            )
            .get(key) as Port.WorkflowMembership | undefined) ?? null,
      );
    },
    workflowEdges: (id) => {
      return run(() =>
        workflowEdgesFromRows(
          db
            .prepare(
              `SELECT CAST(d.dependency_id AS TEXT) AS dependency_id, CAST(d.dependant_id AS TEXT) AS dependant_id,
                      d.on_failure
               FROM ${t}_workflow_steps AS s JOIN ${deps} AS d ON d.dependant_id = s.command_id
               WHERE s.workflow_id = ?`,
            )
            .all(id) as WorkflowEdgeRow[],
        ),
      );
    },
    workflowSteps: (id) => {
      return run(
        () =>
          db
            .prepare(
              `SELECT step AS name, CAST(command_id AS TEXT) AS id FROM ${t}_workflow_steps
               WHERE workflow_id = ? ORDER BY position`,
            )
            .all(id) as Port.WorkflowStepRecord[],
      );
    },
  };
}
