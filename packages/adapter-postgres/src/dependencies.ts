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
import type { PostgresConnection } from './connection.js';
import type { TableNames } from './names.js';

/*
 * Dependencies on PostgreSQL (core ports/dependencies.ts, store-kit dependencies.ts). A SUCCESS
 * settles its dependants in the statement that completes it, for the whole batch at once
 * (settle_succeeded, migration 22); every other transition, whichever statement writes it in place
 * (fail, reclaim, kill, cancel, a revive), settles them through a trigger on the command table, in
 * its own transaction. The trigger fires only for rows marked `has_dependants`, so a command
 * without dependants pays nothing but the trigger's WHEN test. A cancelled dependant is itself a
 * terminal transition: the trigger fires again for it, so a cancellation cascades down the graph.
 */

const NOW = `date_trunc('milliseconds', now())`;

/** The SQLSTATE of claim_lost() (migration 22): a completion sent with its COMMIT found its claim gone. */
export const CLAIM_LOST = 'ACF01';

/**
 * The update of the dependants listed by `from` (a FROM item aliased s, with s.dependant_id and
 * the changes to their counters s.dw, s.db): each takes its new counters and, in the same write,
 * the status they call for: cancelled (a blocking dependency), released (none left), revived
 * (cancelled by a dependency, no longer blocked), or as it was.
 */
function moveDependantsSql(n: TableNames, from: string, returning: string): string {
  const w = 'c.waiting_for + s.dw';
  const b = 'c.blocked_by + s.db';
  const cancel = `(c.status = 'WAITING' AND ${b} > 0)`;
  const release = `(c.status = 'WAITING' AND ${b} = 0 AND ${w} = 0)`;
  const revive = `(c.status = 'CANCELLED' AND c.dependency_cancelled AND ${b} = 0)`;
  return `
           UPDATE ${n.table} AS c SET waiting_for = ${w}, blocked_by = ${b},
             status = CASE WHEN ${cancel} THEN 'CANCELLED' WHEN ${release} THEN 'PENDING'
               WHEN ${revive} THEN CASE WHEN ${w} = 0 THEN 'PENDING' ELSE 'WAITING' END ELSE c.status END,
             next_run_at = CASE WHEN ${release} OR (${revive} AND ${w} = 0)
               THEN GREATEST(c.next_run_at, ${NOW}) ELSE c.next_run_at END,
             dependency_cancelled = CASE WHEN ${cancel} THEN TRUE WHEN ${revive} THEN FALSE ELSE c.dependency_cancelled END,
             finished_at = CASE WHEN ${cancel} THEN ${NOW} WHEN ${revive} THEN NULL ELSE c.finished_at END,
             last_error = CASE WHEN ${cancel} THEN '${DEPENDENCY_CANCELLED_ERROR}' WHEN ${revive} THEN NULL
               ELSE c.last_error END,
             updated_at = ${NOW}
           FROM ${from} WHERE c.id = s.dependant_id
           ${returning}`;
}

/** Migration 18: the status WAITING, the counters, the edges, the workflows, the trigger. */
export function dependenciesDdl(n: TableNames): string[] {
  const t = n.table;
  const check = `"${n.tableName}_status_check"`;
  const moveDependants = moveDependantsSql(n, 'settled AS s', 'RETURNING c.status');
  return [
    // Every existing row holds one of the old statuses, so the wider check needs no scan of them
    // under the table's lock (NOT VALID); every write from now on is checked.
    `ALTER TABLE ${t} DROP CONSTRAINT IF EXISTS ${check}`,
    `ALTER TABLE ${t} ADD CONSTRAINT ${check}
       CHECK (status IN ('WAITING', 'PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED')) NOT VALID`,
    // Constant defaults: added without rewriting the table.
    `ALTER TABLE ${t}
       ADD COLUMN IF NOT EXISTS waiting_for          INTEGER NOT NULL DEFAULT 0,
       ADD COLUMN IF NOT EXISTS blocked_by           INTEGER NOT NULL DEFAULT 0,
       ADD COLUMN IF NOT EXISTS has_dependants       BOOLEAN NOT NULL DEFAULT FALSE,
       ADD COLUMN IF NOT EXISTS dependency_cancelled BOOLEAN NOT NULL DEFAULT FALSE`,
    `CREATE TABLE IF NOT EXISTS ${n.dependencies} (
       dependency_id BIGINT   NOT NULL,
       dependant_id  BIGINT   NOT NULL,
       on_failure    TEXT     NOT NULL CHECK (on_failure IN ('cancel', 'continue')),
       state         SMALLINT NOT NULL,
       PRIMARY KEY (dependency_id, dependant_id)
     )`,
    `CREATE INDEX IF NOT EXISTS ${n.index('dependant_idx')} ON ${n.dependencies} (dependant_id)`,
    `CREATE TABLE IF NOT EXISTS ${n.workflowSteps} (
       workflow_id TEXT   NOT NULL,
       step        TEXT   NOT NULL,
       command_id  BIGINT NOT NULL,
       position    INTEGER NOT NULL,
       PRIMARY KEY (workflow_id, step)
     )`,
    `CREATE OR REPLACE FUNCTION ${n.fn('settle')}() RETURNS trigger
     LANGUAGE plpgsql
     SET search_path = pg_catalog, pg_temp
     AS $fn$
     DECLARE
       released integer := 0;
     BEGIN
       IF NEW.status = 'SUCCESS' THEN
         WITH edges AS (
           SELECT dependant_id, state FROM ${n.dependencies}
           WHERE dependency_id = NEW.id AND state IN (${EDGE_OPEN}, ${EDGE_BLOCKED})
           FOR UPDATE
         ), settled AS (
           UPDATE ${n.dependencies} AS d SET state = ${EDGE_SATISFIED} FROM edges
           WHERE d.dependency_id = NEW.id AND d.dependant_id = edges.dependant_id
           RETURNING d.dependant_id, -1 AS dw, CASE WHEN edges.state = ${EDGE_BLOCKED} THEN -1 ELSE 0 END AS db
         ), moved AS (${moveDependants})
         SELECT count(*) INTO released FROM moved WHERE moved.status = 'PENDING';
       ELSIF NEW.status IN ('DEAD', 'CANCELLED') AND OLD.status NOT IN ('DEAD', 'CANCELLED') THEN
         WITH settled AS (
           UPDATE ${n.dependencies} AS d
           SET state = CASE WHEN d.on_failure = 'continue' THEN ${EDGE_SATISFIED} ELSE ${EDGE_BLOCKED} END
           WHERE d.dependency_id = NEW.id AND d.state = ${EDGE_OPEN}
           RETURNING d.dependant_id, CASE WHEN d.state = ${EDGE_SATISFIED} THEN -1 ELSE 0 END AS dw,
             CASE WHEN d.state = ${EDGE_BLOCKED} THEN 1 ELSE 0 END AS db
         ), moved AS (${moveDependants})
         SELECT count(*) INTO released FROM moved WHERE moved.status = 'PENDING';
       ELSIF OLD.status = 'CANCELLED' AND NEW.status IN ('WAITING', 'PENDING') THEN
         -- Revived (its own blocking dependency succeeded after a retry): what it blocked waits again.
         WITH settled AS (
           UPDATE ${n.dependencies} AS d SET state = ${EDGE_OPEN}
           WHERE d.dependency_id = NEW.id AND d.state = ${EDGE_BLOCKED}
           RETURNING d.dependant_id, 0 AS dw, -1 AS db
         ), moved AS (${moveDependants})
         SELECT count(*) INTO released FROM moved WHERE moved.status = 'PENDING';
       END IF;
       -- Released work wakes every instance when this transaction commits, as a submit would.
       IF released > 0 THEN
         PERFORM pg_notify('${n.channel}', 'released');
       END IF;
       RETURN NULL;
     END
     $fn$`,
    ...settleTriggerDdl(n, 'NEW.has_dependants AND OLD.status IS DISTINCT FROM NEW.status'),
  ];
}

function settleTriggerDdl(n: TableNames, when: string): string[] {
  return [
    `DROP TRIGGER IF EXISTS "${n.tableName}_settle" ON ${n.table}`,
    `CREATE TRIGGER "${n.tableName}_settle" AFTER UPDATE OF status ON ${n.table}
       FOR EACH ROW WHEN (${when})
       EXECUTE FUNCTION ${n.fn('settle')}()`,
  ];
}

/**
 * Migration 22: a SUCCESS settles its dependants in the statement that writes it, through the
 * function settle_succeeded, once for the whole batch instead of a trigger call per row; the
 * trigger, left for the updates in place (a failure, a kill, a cancel, a revive, a schedule's
 * tick), fires only on the transitions it acts on, not on a dependant's own release or claim.
 *
 * settle_succeeded(ids) does what the trigger does for a SUCCESS, for all of `ids` at once: their
 * open edges are satisfied, each dependant's counters change by the sum over its edges (a fan-in's
 * callback is written once per batch, not once per member), the dependants are locked in id order
 * before they are written (two batches settling the same ones wait rather than deadlock), and one
 * NOTIFY wakes every instance if any was released. It is a function, not CTEs of the completing
 * statement, for the snapshot: its statements see every edge committed before the completion took
 * its rows' locks, as the trigger's do, so a dependant submitted while its dependency was
 * finishing is never missed (a submit locks the dependency's row before it adds an edge).
 */
export function settleSucceededDdl(n: TableNames): string[] {
  const d = n.dependencies;
  const dependants = moveDependantsSql(n, 'settle_locked AS s', 'RETURNING c.status');
  return [
    // What a completion sent with its COMMIT raises when the claim was taken away (sql.ts
    // completeAtCommit): the transaction fails, so the stale attempt's writes never commit.
    `CREATE OR REPLACE FUNCTION ${n.fn('claim_lost')}() RETURNS bigint
     LANGUAGE plpgsql
     AS $fn$
     BEGIN
       RAISE EXCEPTION 'the claim was taken away' USING ERRCODE = '${CLAIM_LOST}';
     END
     $fn$`,
    `CREATE OR REPLACE FUNCTION ${n.fn('settle_succeeded')}(succeeded_ids bigint[]) RETURNS integer
     LANGUAGE plpgsql
     SET search_path = pg_catalog, pg_temp
     AS $fn$
     DECLARE
       released_count integer := 0;
     BEGIN
       WITH settle_edges AS (
         SELECT e.dependency_id, e.dependant_id, e.state FROM ${d} AS e
         WHERE e.dependency_id = ANY(succeeded_ids) AND e.state IN (${EDGE_OPEN}, ${EDGE_BLOCKED})
         FOR UPDATE
       ), settle_satisfied AS (
         UPDATE ${d} AS e SET state = ${EDGE_SATISFIED} FROM settle_edges AS o
         WHERE e.dependency_id = o.dependency_id AND e.dependant_id = o.dependant_id
         RETURNING e.dependant_id, o.state AS prior_state
       ), settle_counts AS (
         SELECT dependant_id, -count(*)::integer AS dw,
           -(count(*) FILTER (WHERE prior_state = ${EDGE_BLOCKED}))::integer AS db
         FROM settle_satisfied GROUP BY dependant_id
       ), settle_locked AS (
         SELECT c.id AS dependant_id, s.dw, s.db FROM ${n.table} AS c JOIN settle_counts AS s ON c.id = s.dependant_id
         ORDER BY c.id FOR UPDATE OF c
       ), moved AS (${dependants})
       SELECT count(*) INTO released_count FROM moved WHERE moved.status = 'PENDING';
       IF released_count > 0 THEN
         PERFORM pg_notify('${n.channel}', 'released');
       END IF;
       RETURN released_count;
     END
     $fn$`,
    ...settleTriggerDdl(
      n,
      `NEW.has_dependants AND OLD.status IS DISTINCT FROM NEW.status
       AND (NEW.status IN ('SUCCESS', 'DEAD', 'CANCELLED') OR OLD.status = 'CANCELLED')`,
    ),
  ];
}

const UNIQUE_VIOLATION = '23505';

/** The dependency engine of a PostgreSQL store: submits in the caller's transaction, reads outside. */
export function postgresDependencyEngine<Tx>(c: PostgresConnection<Tx>, n: TableNames): DependencyEngine<Tx> {
  const t = n.table;
  return {
    lock: async (tx, ids) => {
      const read = (text: string, wanted: readonly string[]) =>
        c.queryIn<{ id: string; status: Port.CommandStatus }>(tx, text, [wanted]);
      const rows = await read(
        `SELECT id::text AS id, status FROM ${t} WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`,
        ids,
      );
      const statuses = new Map(rows.rows.map((r) => [r.id, r.status]));
      // The others finished and moved (history.ts), may be in the very statement that the lock
      // above waited for: read in a statement of their own, whose snapshot sees that move.
      const missing = ids.filter((id) => !statuses.has(id));
      if (missing.length > 0) {
        const moved = await read(
          [n.history, n.historyV1]
            .map((h) => `SELECT id::text AS id, status FROM ${h} WHERE id = ANY($1::bigint[])`)
            .join(' UNION ALL '),
          missing,
        );
        for (const r of moved.rows) statuses.set(r.id, r.status);
      }
      return statuses;
    },
    mark: async (tx, ids) => {
      await c.queryIn(
        tx,
        `UPDATE ${t} SET has_dependants = TRUE WHERE id = ANY($1::bigint[]) AND NOT has_dependants`,
        [ids],
      );
    },
    insertEdges: async (tx, edges) => {
      await c.queryIn(
        tx,
        `INSERT INTO ${n.dependencies} (dependency_id, dependant_id, on_failure, state)
             SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::smallint[])`,
        [
          edges.map((e) => e.dependency),
          edges.map((e) => e.dependant),
          edges.map((e) => e.onFailure),
          edges.map((e) => e.state),
        ],
      );
    },
    hold: async (tx, holds) => {
      await c.queryIn(
        tx,
        `UPDATE ${t} AS c SET status = h.status, waiting_for = h.waiting_for, blocked_by = h.blocked_by,
               dependency_cancelled = (h.status = 'CANCELLED'),
               finished_at = CASE WHEN h.status = 'CANCELLED' THEN ${NOW} END,
               last_error = CASE WHEN h.status = 'CANCELLED' THEN $5::text END
             FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::integer[]) AS h(id, status, waiting_for, blocked_by)
             WHERE c.id = h.id`,
        [
          holds.map((h) => h.id),
          holds.map((h) => h.status),
          holds.map((h) => h.waitingFor),
          holds.map((h) => h.blockedBy),
          DEPENDENCY_CANCELLED_ERROR,
        ],
      );
    },
    dependenciesOf: async (id) => {
      const rows = await c.query<DependencyRow>(
        `SELECT c.id, c.type, c.status, d.on_failure, c.result
               FROM ${n.dependencies} AS d
                 JOIN (SELECT id, type, status, result FROM ${t}
                       UNION ALL SELECT id, type, status, result FROM ${n.history}
                       UNION ALL SELECT id, type, status, result FROM ${n.historyV1}) AS c ON c.id = d.dependency_id
               WHERE d.dependant_id = $1::bigint`,
        [id],
      );
      return dependencyOutcomes(rows.rows, (text) => JSON.parse(String(text)) as unknown);
    },
    recordWorkflow: async (tx, workflowId, steps) => {
      const checked = { workflowId, steps };
      const taken = await c.queryIn(tx, `SELECT 1 FROM ${n.workflowSteps} WHERE workflow_id = $1 LIMIT 1`, [
        checked.workflowId,
      ]);
      if (taken.rowCount > 0) throw workflowExists(checked.workflowId);
      await c
        .queryIn(
          tx,
          `INSERT INTO ${n.workflowSteps} (workflow_id, step, command_id, position)
           SELECT $1::text, s.step, s.command_id, s.position
           FROM unnest($2::text[], $3::bigint[]) WITH ORDINALITY AS s(step, command_id, position)`,
          [checked.workflowId, checked.steps.map((s) => s.name), checked.steps.map((s) => s.id)],
        )
        .catch((e: unknown) => {
          // A workflow of the same id committed meanwhile.
          if ((e as { code?: unknown } | null)?.code === UNIQUE_VIOLATION)
            throw workflowExists(checked.workflowId);
          throw e;
        });
    },
    workflowOf: async (id) => {
      const rows = await c.query<{ workflow_id: string; step: string }>(
        `SELECT workflow_id, step FROM ${n.workflowSteps} WHERE command_id = $1::bigint
               ORDER BY workflow_id LIMIT 1`,
        [id],
      );
      const row = rows.rows[0];
      return row === undefined ? null : { workflowId: row.workflow_id, step: row.step };
    },
    workflowEdges: async (workflowId) => {
      const rows = await c.query<WorkflowEdgeRow>(
        `SELECT d.dependency_id, d.dependant_id, d.on_failure
               FROM ${n.workflowSteps} AS s JOIN ${n.dependencies} AS d ON d.dependant_id = s.command_id
               WHERE s.workflow_id = $1`,
        [workflowId],
      );
      return workflowEdgesFromRows(rows.rows);
    },
    workflowSteps: async (workflowId) => {
      const rows = await c.query<{ step: string; command_id: string }>(
        `SELECT step, command_id FROM ${n.workflowSteps} WHERE workflow_id = $1 ORDER BY position`,
        [workflowId],
      );
      return rows.rows.map((r) => ({ name: r.step, id: r.command_id }));
    },
  };
}

function workflowExists(id: string): InvalidArgumentError {
  return new InvalidArgumentError(`workflow ${JSON.stringify(id)} exists already`);
}
