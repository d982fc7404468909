import {
  requireDate,
  requireScheduleDefinition,
  requireScheduleName,
  requireStoredTime,
  type EnqueueTickResult,
  type RunTimeScheduleSettings,
  type ScheduleDefinition,
  type ScheduleRecord,
  type ScheduleStore,
  type ScheduleTick,
} from '@asynccmd/core';
import type { Pool } from 'pg';
import { decodeRunTimeSettings, runTimeScheduleValues, tickRefusal } from '@asynccmd/core/store-kit';
import type { StoreInput } from '@asynccmd/core/store-kit';
import type { TableNames } from './names.js';
import { rowParams } from './rows.js';
import { runInTransaction } from './pipeline/transaction.js';

interface ScheduleRow {
  name: string;
  type: string;
  cron: string;
  timezone: string | null;
  paused: boolean;
  last_tick_ms: number | null;
  active_from_ms: number;
  run_time_settings: string | null;
}

/** The schedules table next to the command table, quoted and qualified. */
export function schedulesTable(n: TableNames): string {
  return `${n.schema}."${n.tableName}_schedules"`;
}

const NOW = `date_trunc('milliseconds', now())`;
/** Times read back as epoch milliseconds, whatever type parsers the caller's pool has. */
const epochMs = (column: string): string => `(extract(epoch FROM ${column}) * 1000)::float8`;

/**
 * Recurring schedules on PostgreSQL: `<table>_schedules` and the partial unique index on
 * (schedule_name, schedule_tick) of the command table (migration 7). A tick is enqueued in one READ
 * COMMITTED transaction: the schedule row is read, the command inserted with ON CONFLICT on that
 * index only (a concurrent insert of the same tick waits for the other to commit, then does
 * nothing), and the last tick moved forward.
 */
export class PostgresScheduleStore implements ScheduleStore {
  readonly #pool: Pool;
  readonly #input: StoreInput;
  readonly #sql: ReturnType<typeof scheduleSql>;

  constructor(pool: Pool, names: TableNames, input: StoreInput) {
    this.#pool = pool;
    this.#input = input;
    this.#sql = scheduleSql(names);
  }

  async declare(definitions: readonly ScheduleDefinition[], now: Date): Promise<void> {
    const rows = definitions.map(requireScheduleDefinition);
    if (rows.length === 0) return;
    const at = requireStoredTime('now', now).toISOString();
    await this.#pool.query(this.#sql.declare, [
      rows.map((d) => d.name),
      rows.map((d) => d.type),
      rows.map((d) => d.cron),
      rows.map((d) => d.timezone),
      at,
    ]);
  }

  async list(): Promise<ScheduleRecord[]> {
    const result = await this.#pool.query<ScheduleRow>(this.#sql.list);
    return result.rows.map(toSchedule);
  }

  async get(name: string): Promise<ScheduleRecord | null> {
    const result = await this.#pool.query<ScheduleRow>(this.#sql.get, [requireScheduleName(name)]);
    const row = result.rows[0];
    return row === undefined ? null : toSchedule(row);
  }

  async setPaused(name: string, paused: boolean, now: Date): Promise<ScheduleRecord | null> {
    const key = requireScheduleName(name);
    const at = requireStoredTime('now', now).toISOString();
    const result = await this.#pool.query<ScheduleRow>(this.#sql.setPaused, [paused === true, at, key]);
    const row = result.rows[0];
    return row === undefined ? null : toSchedule(row);
  }

  async enqueueTick(tick: ScheduleTick): Promise<EnqueueTickResult> {
    const name = requireScheduleName(tick.schedule);
    const at = requireStoredTime('tick', requireDate('tick', tick.tick));
    const v = this.#input.command(tick.command);
    return runInTransaction(this.#pool, async (client): Promise<EnqueueTickResult> => {
      const found = await client.query<ScheduleRow>(this.#sql.get, [name]);
      const row = found.rows[0];
      const refused = tickRefusal(row === undefined ? null : toSchedule(row), at);
      if (refused) return refused;
      const inserted = await client.query<{ id: string }>(this.#sql.insertTick, [
        ...rowParams(v),
        name,
        at.toISOString(),
      ]);
      const id = inserted.rows[0]?.id;
      if (id === undefined) return { outcome: 'duplicate' };
      await client.query(this.#sql.advance, [at.toISOString(), name]);
      return { outcome: 'enqueued', id: String(id) };
    });
  }

  async add(
    definition: ScheduleDefinition,
    settings: RunTimeScheduleSettings,
    now: Date,
  ): Promise<ScheduleRecord | null> {
    const at = requireStoredTime('now', now).toISOString();
    const result = await this.#pool.query<ScheduleRow>(
      this.#sql.add,
      runTimeScheduleValues(definition, settings, at),
    );
    const row = result.rows[0];
    return row === undefined ? null : toSchedule(row);
  }

  async remove(name: string): Promise<boolean> {
    const result = await this.#pool.query(this.#sql.remove, [requireScheduleName(name)]);
    return result.rowCount === 1;
  }
}

function scheduleSql(n: TableNames) {
  const s = schedulesTable(n);
  const columns = `name, type, cron, timezone, paused, ${epochMs('last_tick')} AS last_tick_ms,
    ${epochMs('active_from')} AS active_from_ms, run_time_settings`;
  return {
    declare: `INSERT INTO ${s} (name, type, cron, timezone, paused, active_from)
       SELECT d.name, d.type, d.cron, d.timezone, FALSE, $5::timestamptz
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS d (name, type, cron, timezone)
       ON CONFLICT (name) DO UPDATE
         SET type = excluded.type, cron = excluded.cron, timezone = excluded.timezone, run_time_settings = NULL`,
    // A declaration in code takes over a run-time schedule of its name (run_time_settings = NULL above).
    add: `INSERT INTO ${s} (name, type, cron, timezone, paused, active_from, run_time_settings)
       VALUES ($1, $2, $3, $4, FALSE, $5::timestamptz, $6)
       ON CONFLICT (name) DO NOTHING
       RETURNING ${columns}`,
    list: `SELECT ${columns} FROM ${s} ORDER BY name`,
    get: `SELECT ${columns} FROM ${s} WHERE name = $1`,
    // A resume (paused → running) moves active_from; any other call leaves it.
    setPaused: `UPDATE ${s}
       SET active_from = CASE WHEN paused AND NOT $1::boolean THEN $2::timestamptz ELSE active_from END,
           paused = $1::boolean
       WHERE name = $3
       RETURNING ${columns}`,
    insertTick: `INSERT INTO ${n.table} (type, biz_key, payload, max_retry, next_run_at, owner, headers,
         created_at, updated_at, schedule_name, schedule_tick, priority, ordering_key)
       VALUES ($1, $2, $3::json, $4, COALESCE($5::timestamptz, ${NOW}), $6, $7::json, ${NOW}, ${NOW},
         $10, $11::timestamptz, $8::smallint, $9)
       ON CONFLICT (schedule_name, schedule_tick) WHERE schedule_name IS NOT NULL DO NOTHING
       RETURNING id::text AS id`,
    advance: `UPDATE ${s} SET last_tick = $1::timestamptz
       WHERE name = $2 AND (last_tick IS NULL OR last_tick < $1::timestamptz)`,
    remove: `DELETE FROM ${s} WHERE name = $1`,
  };
}

function toSchedule(row: ScheduleRow): ScheduleRecord {
  return {
    name: row.name,
    type: row.type,
    cron: row.cron,
    timezone: row.timezone,
    paused: row.paused,
    lastTick: row.last_tick_ms === null ? null : new Date(Number(row.last_tick_ms)),
    activeFrom: new Date(Number(row.active_from_ms)),
    runTime: decodeRunTimeSettings(row.run_time_settings),
  };
}
