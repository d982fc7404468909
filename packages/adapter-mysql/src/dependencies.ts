import {
  DEPENDENCY_CANCELLED_ERROR,
  dependencyOutcomes,
  EDGE_BLOCKED,
  EDGE_OPEN,
  EDGE_SATISFIED,
  workflowEdgesFromRows,
} from '@asynccmd/core/store-kit';
import type { DependencyEngine, DependencyRow, EdgeState, WorkflowEdgeRow } from '@asynccmd/core/store-kit';
import { InvalidArgumentError } from '@asynccmd/core';
import type * as Port from '@asynccmd/core';
import type { Connection, Pool } from 'mysql2/promise';
import { isDuplicateKey, retryConnectionLoss, select, write } from './connection.js';
import type { Queryable } from './connection.js';
import { historyTable } from './history.js';

/*
 * Dependencies on MySQL and MariaDB (core ports/dependencies.ts, store-kit dependencies.ts). A
 * MySQL trigger may not write the table whose statement fired it, so here the store itself settles
 * the dependants of a terminal transition, in that transition's transaction: `settleDependants`
 * after complete, fail to DEAD, reclaim to DEAD, kill and cancel. The fast complete leaves rows
 * marked `has_dependants` alone (its guard), and those take the path through a transaction; a
 * command without dependants pays nothing more. Every statement binds explicit placeholder lists,
 * so it runs through an ORM's SqlExecutor too.
 */

const DB_NOW = 'UTC_TIMESTAMP(3)';
const IN_CHUNK = 1000;

/** Where settle runs: a transaction's connection, or an SqlExecutor over one. */
export interface SettleSession {
  select<T>(sql: string, values: readonly Port.SqlValue[]): Promise<T[]>;
  write(sql: string, values: readonly Port.SqlValue[]): Promise<void>;
}

export function connectionSession(conn: Queryable): SettleSession {
  return {
    select: (sql, values) => select(conn, sql, values),
    write: async (sql, values) => {
      await write(conn, sql, values);
    },
  };
}

const marks = (n: number): string => Array.from({ length: n }, () => '?').join(', ');

function chunks<T>(items: readonly T[], size = IN_CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Migration 16 past the status CHECK: the counters, the edges, the workflows. */
export function dependenciesDdl(t: string, collation: string, hasColumns: boolean): string[] {
  return [
    ...(hasColumns
      ? []
      : [
          `ALTER TABLE \`${t}\`
             ADD COLUMN waiting_for INT NOT NULL DEFAULT 0,
             ADD COLUMN blocked_by INT NOT NULL DEFAULT 0,
             ADD COLUMN has_dependants TINYINT(1) NOT NULL DEFAULT 0,
             ADD COLUMN dependency_cancelled TINYINT(1) NOT NULL DEFAULT 0`,
        ]),
    `CREATE TABLE IF NOT EXISTS \`${t}_dependencies\` (
       dependency_id BIGINT UNSIGNED NOT NULL,
       dependant_id  BIGINT UNSIGNED NOT NULL,
       on_failure    VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
       state         SMALLINT NOT NULL,
       PRIMARY KEY (dependency_id, dependant_id),
       KEY idx_dependant (dependant_id)
     ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`,
    `CREATE TABLE IF NOT EXISTS \`${t}_workflow_steps\` (
       workflow_id VARCHAR(128)    NOT NULL,
       step        VARCHAR(128)    NOT NULL,
       command_id  BIGINT UNSIGNED NOT NULL,
       position    INT             NOT NULL,
       PRIMARY KEY (workflow_id, step)
     ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`,
  ];
}

/**
 * The statement that widens the status CHECK to admit WAITING. MySQL names an unnamed CHECK
 * `<table>_chk_1`, MariaDB `CONSTRAINT_1`: on a table that exists the old one is found in the
 * catalog by its clause (none when the wider one is there already: a re-run); for a script run
 * from scratch (`fresh`), the name this server gives migration 1's.
 */
export async function widenStatusCheck(conn: Queryable, t: string, fresh: boolean): Promise<string[]> {
  let names: string[];
  if (fresh) {
    const [server] = await select<{ version: string }>(conn, 'SELECT VERSION() AS version');
    names = [/mariadb/i.test(server?.version ?? '') ? 'CONSTRAINT_1' : `${t}_chk_1`];
  } else {
    const checks = await select<{ name: string; clause: string }>(
      conn,
      `SELECT tc.CONSTRAINT_NAME AS name, cc.CHECK_CLAUSE AS clause
       FROM information_schema.TABLE_CONSTRAINTS AS tc
       JOIN information_schema.CHECK_CONSTRAINTS AS cc
         ON cc.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA AND cc.CONSTRAINT_NAME = tc.CONSTRAINT_NAME
       WHERE tc.TABLE_SCHEMA = DATABASE() AND tc.TABLE_NAME = ? AND tc.CONSTRAINT_TYPE = 'CHECK'`,
      [t],
    );
    const status = checks.filter((c) => c.clause.includes('CANCELLED'));
    if (status.some((c) => c.clause.includes('WAITING'))) return [];
    names = status.map((c) => c.name);
  }
  return [
    `ALTER TABLE \`${t}\` ${[
      ...names.map((name) => `DROP CONSTRAINT \`${name.replaceAll('`', '')}\``),
      `ADD CONSTRAINT \`${t}_status\` CHECK (status IN ('WAITING', 'PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED'))`,
    ].join(', ')}`,
  ];
}

interface EdgeRow {
  readonly dependency_id: string;
  readonly dependant_id: string;
  readonly on_failure: string;
  readonly state: number;
}

interface DependantRow {
  readonly id: string;
  readonly status: string;
  readonly waiting_for: number;
  readonly blocked_by: number;
  readonly dependency_cancelled: number;
}

type Settled = 'success' | 'failure' | 'revival';

/** How a change of each kind moves its dependency's edges (settleDependants' rules, in SQL). */
const EDGE_MOVES: Record<Settled, { readonly from: string; readonly to: string }> = {
  success: { from: `state <> ${EDGE_SATISFIED}`, to: `${EDGE_SATISFIED}` },
  failure: {
    from: `state = ${EDGE_OPEN}`,
    to: `CASE WHEN on_failure = 'continue' THEN ${EDGE_SATISFIED} ELSE ${EDGE_BLOCKED} END`,
  },
  revival: { from: `state = ${EDGE_BLOCKED}`, to: `${EDGE_OPEN}` },
};

/** What a terminal status means for the dependants (null: nothing). */
export function settledBy(status: string): Settled | null {
  if (status === 'SUCCESS') return 'success';
  if (status === 'DEAD' || status === 'CANCELLED') return 'failure';
  return null;
}

/**
 * Settles the dependants of commands that just changed status in the transaction of `session`
 * (each given with what its change means), down the graph: a dependant cancelled by it is settled
 * in turn, as is one revived. The rows of `changed` must be locked by that transaction already.
 * Reads only commands marked `has_dependants` (`allMarked`: the caller read that every one of
 * `changed` is); a batch with none costs one indexed read. Returns how many dependants it made
 * PENDING (claimable once the transaction commits).
 */
export async function settleDependants(
  session: SettleSession,
  t: string,
  changed: readonly { readonly id: string; readonly settled: Settled }[],
  allMarked = false,
): Promise<number> {
  let released = 0;
  let queue = [...changed];
  // Those of `changed` the caller read as marked already need no look.
  let known = allMarked;
  while (queue.length > 0) {
    const next: { id: string; settled: Settled }[] = [];
    const ids = queue.map((c) => c.id);
    const marked = new Set<string>(known ? ids : []);
    for (const part of known ? [] : chunks(ids)) {
      const rows = await session.select<{ id: string }>(
        `SELECT id FROM \`${t}\` WHERE id IN (${marks(part.length)}) AND has_dependants = 1`,
        part,
      );
      for (const r of rows) marked.add(String(r.id));
    }
    known = false;
    const kinds = new Map(queue.filter((c) => marked.has(c.id)).map((c) => [c.id, c.settled]));
    queue = [];
    if (kinds.size === 0) break;
    const edges: EdgeRow[] = [];
    for (const part of chunks([...kinds.keys()].sort(compareIds))) {
      edges.push(
        ...(await session.select<EdgeRow>(
          `SELECT dependency_id, dependant_id, on_failure, state FROM \`${t}_dependencies\`
           WHERE dependency_id IN (${marks(part.length)}) ORDER BY dependency_id, dependant_id FOR UPDATE`,
          part,
        )),
      );
    }
    // What each edge's move does to its dependant's counters; the edges move in one statement per
    // kind of change (EDGE_MOVES: the same rules), by the dependency's key.
    const moving = new Map<Settled, Set<string>>();
    const delta = new Map<string, { waiting: number; blocked: number }>();
    for (const e of edges) {
      const kind = kinds.get(String(e.dependency_id));
      const state = Number(e.state);
      let to: EdgeState | null = null;
      let waiting = 0;
      let blocked = 0;
      if (kind === 'success' && state !== EDGE_SATISFIED) {
        to = EDGE_SATISFIED;
        waiting = -1;
        blocked = state === EDGE_BLOCKED ? -1 : 0;
      } else if (kind === 'failure' && state === EDGE_OPEN) {
        to = e.on_failure === 'continue' ? EDGE_SATISFIED : EDGE_BLOCKED;
        waiting = to === EDGE_SATISFIED ? -1 : 0;
        blocked = to === EDGE_BLOCKED ? 1 : 0;
      } else if (kind === 'revival' && state === EDGE_BLOCKED) {
        to = EDGE_OPEN;
        blocked = -1;
      }
      if (to === null || kind === undefined) continue;
      const ofKind = moving.get(kind) ?? new Set<string>();
      moving.set(kind, ofKind.add(String(e.dependency_id)));
      const d = delta.get(String(e.dependant_id)) ?? { waiting: 0, blocked: 0 };
      delta.set(String(e.dependant_id), { waiting: d.waiting + waiting, blocked: d.blocked + blocked });
    }
    for (const [kind, dependencies] of moving) {
      const move = EDGE_MOVES[kind];
      for (const part of chunks([...dependencies].sort(compareIds))) {
        await session.write(
          `UPDATE \`${t}_dependencies\` SET state = ${move.to}
           WHERE dependency_id IN (${marks(part.length)}) AND ${move.from}`,
          part,
        );
      }
    }
    const dependants = [...delta.keys()].sort(compareIds);
    const toCancel: string[] = [];
    const toPending: string[] = [];
    const toWaiting: string[] = [];
    // Dependants with the same change of counters take one statement (a fan-in: all of them).
    const byDelta = new Map<string, { waiting: number; blocked: number; ids: string[] }>();
    for (const part of chunks(dependants)) {
      const rows = await session.select<DependantRow>(
        `SELECT id, status, waiting_for, blocked_by, dependency_cancelled FROM \`${t}\`
         WHERE id IN (${marks(part.length)}) ORDER BY id FOR UPDATE`,
        part,
      );
      for (const r of rows) {
        const id = String(r.id);
        const d = delta.get(id)!;
        const waiting = Number(r.waiting_for) + d.waiting;
        const blocked = Number(r.blocked_by) + d.blocked;
        const key = `${d.waiting} ${d.blocked}`;
        const group = byDelta.get(key) ?? { ...d, ids: [] };
        group.ids.push(id);
        byDelta.set(key, group);
        if (r.status === 'WAITING' && blocked > 0) {
          toCancel.push(id);
          next.push({ id, settled: 'failure' });
        } else if (r.status === 'WAITING' && waiting === 0) {
          toPending.push(id);
        } else if (r.status === 'CANCELLED' && Number(r.dependency_cancelled) === 1 && blocked === 0) {
          (waiting === 0 ? toPending : toWaiting).push(id);
          next.push({ id, settled: 'revival' });
        }
      }
    }
    for (const group of byDelta.values()) {
      for (const part of chunks(group.ids)) {
        await session.write(
          `UPDATE \`${t}\` SET waiting_for = waiting_for + ?, blocked_by = blocked_by + ?
           WHERE id IN (${marks(part.length)})`,
          [group.waiting, group.blocked, ...part],
        );
      }
    }
    for (const part of chunks(toCancel)) {
      await session.write(
        `UPDATE \`${t}\` SET status = 'CANCELLED', dependency_cancelled = 1, finished_at = ${DB_NOW},
           updated_at = ${DB_NOW}, last_error = ? WHERE id IN (${marks(part.length)})`,
        [DEPENDENCY_CANCELLED_ERROR, ...part],
      );
    }
    // MySQL assigns SET left to right: last_error reads dependency_cancelled before it is cleared.
    const release = (status: 'PENDING' | 'WAITING'): string =>
      `UPDATE \`${t}\` SET status = '${status}',
         ${status === 'PENDING' ? `next_run_at = GREATEST(next_run_at, ${DB_NOW}),` : ''}
         last_error = IF(dependency_cancelled = 1, NULL, last_error), dependency_cancelled = 0,
         finished_at = NULL, updated_at = ${DB_NOW}`;
    for (const part of chunks(toPending)) {
      await session.write(`${release('PENDING')} WHERE id IN (${marks(part.length)})`, part);
    }
    released += toPending.length;
    for (const part of chunks(toWaiting)) {
      await session.write(`${release('WAITING')} WHERE id IN (${marks(part.length)})`, part);
    }
    queue = next;
  }
  return released;
}

/**
 * The fast complete passes over rows marked `has_dependants` (its guard): these refs' commands
 * are completed here instead, in a transaction that locks those still held under their claims,
 * completes them in one statement (`completeHeld`, sql.ts) and settles their dependants with
 * them. Returns how many dependants it released.
 */
export async function completeMarked(
  t: string,
  completeHeld: (results: number) => string,
  refs: readonly { readonly id: string; readonly token: string; readonly resultJson?: string }[],
  inTransaction: <T>(fn: (conn: Queryable) => Promise<T>) => Promise<T>,
): Promise<number> {
  const ids = [...new Set(refs.map((r) => r.id))];
  return inTransaction(async (conn) => {
    const held = new Set<string>();
    for (const part of chunks(ids)) {
      const rows = await select<{ id: string; claim_token: string }>(
        conn,
        `SELECT id, claim_token FROM \`${t}\` WHERE id IN (?) AND status = 'RUNNING' AND has_dependants = 1
         ORDER BY id FOR UPDATE`,
        [part],
      );
      for (const r of rows) held.add(`${String(r.id)} ${r.claim_token}`);
    }
    // Each command once, with the result its held claim's attempt left (a ref given twice: the first).
    const done = new Map<string, string | undefined>();
    for (const r of refs) {
      if (held.has(`${r.id} ${r.token}`) && !done.has(r.id)) done.set(r.id, r.resultJson);
    }
    for (const part of chunks([...done.keys()])) {
      const results = part.filter((id) => done.get(id) !== undefined);
      await write(conn, completeHeld(results.length), [
        ...results.flatMap((id) => [id, done.get(id)!]),
        part,
      ]);
    }
    return settleDependants(
      connectionSession(conn),
      t,
      [...done.keys()].map((id) => ({ id, settled: 'success' as const })),
      true,
    );
  });
}

function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** The dependency engine of a MySQL store: submits on the caller's connection, reads on `pool`. */
export function mysqlDependencyEngine(pool: Pool, t: string): DependencyEngine<Connection> {
  return {
    lock: async (conn, ids) => {
      const found = new Map<string, Port.CommandStatus>();
      for (const part of chunks(ids)) {
        const rows = await select<{ id: string; status: Port.CommandStatus }>(
          conn,
          `SELECT id, status FROM \`${t}\` WHERE id IN (?) ORDER BY id FOR UPDATE`,
          [part],
        );
        for (const r of rows) found.set(String(r.id), r.status);
      }
      // A dependency that succeeded may have moved to the history (history.ts), for good: a
      // locking read sees the latest committed rows, whatever the caller's snapshot.
      const moved = ids.filter((id) => !found.has(id));
      for (const part of chunks(moved)) {
        const rows = await select<{ id: string; status: Port.CommandStatus }>(
          conn,
          `SELECT id, status FROM \`${historyTable(t)}\` WHERE id IN (?) LOCK IN SHARE MODE`,
          [part],
        );
        for (const r of rows) found.set(String(r.id), r.status);
      }
      return found;
    },
    mark: async (conn, ids) => {
      for (const part of chunks(ids)) {
        await write(conn, `UPDATE \`${t}\` SET has_dependants = 1 WHERE id IN (?) AND has_dependants = 0`, [
          part,
        ]);
      }
    },
    insertEdges: async (conn, edges) => {
      for (const part of chunks(edges, 500)) {
        await write(
          conn,
          `INSERT INTO \`${t}_dependencies\` (dependency_id, dependant_id, on_failure, state) VALUES ?`,
          [part.map((e) => [e.dependency, e.dependant, e.onFailure, e.state])],
        );
      }
    },
    hold: async (conn, holds) => {
      for (const h of holds) {
        await write(
          conn,
          `UPDATE \`${t}\` SET status = ?, waiting_for = ?, blocked_by = ?, dependency_cancelled = ?,
                 finished_at = IF(? = 'CANCELLED', ${DB_NOW}, NULL), last_error = IF(? = 'CANCELLED', ?, NULL)
               WHERE id = ?`,
          [
            h.status,
            h.waitingFor,
            h.blockedBy,
            h.status === 'CANCELLED' ? 1 : 0,
            h.status,
            h.status,
            DEPENDENCY_CANCELLED_ERROR,
            h.id,
          ],
        );
      }
    },
    dependenciesOf: async (id) => {
      const key = id;
      const rows = await retryConnectionLoss(() =>
        select<DependencyRow>(
          pool,
          [t, historyTable(t)]
            .map(
              (table) => `SELECT c.id, c.type, c.status, d.on_failure, c.result
           FROM \`${t}_dependencies\` AS d JOIN \`${table}\` AS c ON c.id = d.dependency_id
           WHERE d.dependant_id = ?`,
            )
            .join(' UNION ALL '),
          [key, key],
        ),
      );
      return dependencyOutcomes(rows, (text) => JSON.parse(String(text)) as unknown);
    },
    recordWorkflow: async (tx, workflowId, steps) => {
      const checked = { workflowId, steps };
      const taken = await select(
        tx,
        `SELECT 1 AS taken FROM \`${t}_workflow_steps\` WHERE workflow_id = ? LIMIT 1`,
        [checked.workflowId],
      );
      if (taken.length > 0) throw workflowExists(checked.workflowId);
      try {
        for (const part of chunks(checked.steps, 500)) {
          const offset = checked.steps.indexOf(part[0]!);
          await write(
            tx,
            `INSERT INTO \`${t}_workflow_steps\` (workflow_id, step, command_id, position) VALUES ?`,
            [part.map((s, i) => [checked.workflowId, s.name, s.id, offset + i])],
          );
        }
      } catch (e) {
        if (isDuplicateKey(e)) throw workflowExists(checked.workflowId);
        throw e;
      }
    },
    workflowOf: async (id) => {
      const [row] = await retryConnectionLoss(() =>
        select<{ workflow_id: string; step: string }>(
          pool,
          `SELECT workflow_id, step FROM \`${t}_workflow_steps\` WHERE command_id = ?
           ORDER BY workflow_id LIMIT 1`,
          [id],
        ),
      );
      return row === undefined ? null : { workflowId: row.workflow_id, step: row.step };
    },
    workflowEdges: async (workflowId) => {
      const rows = await retryConnectionLoss(() =>
        select<WorkflowEdgeRow>(
          pool,
          `SELECT d.dependency_id, d.dependant_id, d.on_failure
           FROM \`${t}_workflow_steps\` AS s JOIN \`${t}_dependencies\` AS d ON d.dependant_id = s.command_id
           WHERE s.workflow_id = ?`,
          [workflowId],
        ),
      );
      return workflowEdgesFromRows(rows);
    },
    workflowSteps: async (workflowId) => {
      const id = workflowId;
      const rows = await retryConnectionLoss(() =>
        select<{ step: string; command_id: string }>(
          pool,
          `SELECT step, command_id FROM \`${t}_workflow_steps\` WHERE workflow_id = ? ORDER BY position`,
          [id],
        ),
      );
      return rows.map((r) => ({ name: r.step, id: String(r.command_id) }));
    },
  };
}

function workflowExists(id: string): InvalidArgumentError {
  return new InvalidArgumentError(`workflow ${JSON.stringify(id)} exists already`);
}
