import type {
  EnqueueTickResult,
  RunTimeScheduleSettings,
  ScheduleDefinition,
  ScheduleRecord,
} from '@asynccmd/core';
import { decodeRunTimeSettings, runTimeScheduleValues, tickRefusal } from '@asynccmd/core/store-kit';
import type { CheckedScheduleTick, ScheduleEngine } from '@asynccmd/core/store-kit';
import type { PostgresConnection } from './connection.js';
import { flowKeyOf } from './flow-keys.js';
import type { TableNames } from './names.js';
import { rowParams } from './rows.js';

/** A schedule row as the statements read it: every column as text. */
interface ScheduleRow {
  name: string;
  type: string;
  cron: string;
  timezone: string | null;
  paused: string;
  last_tick_ms: string | null;
  active_from_ms: string;
  run_time_settings: string | null;
}

/** The schedules table next to the command table, quoted and qualified. */
export function schedulesTable(n: TableNames): string {
  return `${n.schema}."${n.tableName}_schedules"`;
}

const NOW = `date_trunc('milliseconds', now())`;
/** Times read back as epoch milliseconds. */
const epochMs = (column: string): string => `(extract(epoch FROM ${column}) * 1000)::float8`;

/**
 * Recurring schedules on PostgreSQL: `<table>_schedules` and the partial unique index on
 * (schedule_name, schedule_tick) of the command table (migration 7). A tick is enqueued in one READ
 * COMMITTED transaction: the schedule row is read, the command inserted with ON CONFLICT on that
 * index only (a concurrent insert of the same tick waits for the other to commit, then does
 * nothing), and the last tick moved forward.
 */
export class PostgresScheduleStore<Tx> implements ScheduleEngine {
  readonly #connection: PostgresConnection<Tx>;
  readonly #sql: ReturnType<typeof scheduleSql>;

  constructor(connection: PostgresConnection<Tx>, names: TableNames) {
    this.#connection = connection;
    this.#sql = scheduleSql(names);
  }

  async declare(rows: readonly ScheduleDefinition[], now: Date): Promise<void> {
    if (rows.length === 0) return;
    const at = now.toISOString();
    await this.#connection.query(this.#sql.declare, [
      rows.map((d) => d.name),
      rows.map((d) => d.type),
      rows.map((d) => d.cron),
      rows.map((d) => d.timezone),
      at,
    ]);
  }

  async list(): Promise<ScheduleRecord[]> {
    const result = await this.#connection.query<ScheduleRow>(this.#sql.list);
    return result.rows.map(toSchedule);
  }

  async get(name: string): Promise<ScheduleRecord | null> {
    const result = await this.#connection.query<ScheduleRow>(this.#sql.get, [name]);
    const row = result.rows[0];
    return row === undefined ? null : toSchedule(row);
  }

  async setPaused(name: string, paused: boolean, now: Date): Promise<ScheduleRecord | null> {
    const key = name;
    const at = now.toISOString();
    const result = await this.#connection.query<ScheduleRow>(this.#sql.setPaused, [paused === true, at, key]);
    const row = result.rows[0];
    return row === undefined ? null : toSchedule(row);
  }

  async enqueueTick(tick: CheckedScheduleTick): Promise<EnqueueTickResult> {
    const { schedule: name, tick: at, command: v } = tick;
    const connection = this.#connection;
    return connection.transaction(async (tx): Promise<EnqueueTickResult> => {
      const found = await connection.queryIn<ScheduleRow>(tx, this.#sql.get, [name]);
      const row = found.rows[0];
      const refused = tickRefusal(row === undefined ? null : toSchedule(row), at);
      if (refused) return refused;
      const inserted = await connection.queryIn<{ id: string }>(tx, this.#sql.insertTick, [
        ...rowParams(v),
        name,
        at.toISOString(),
      ]);
      const id = inserted.rows[0]?.id;
      if (id === undefined) return { outcome: 'duplicate' };
      await connection.queryIn(tx, this.#sql.advance, [at.toISOString(), name]);
      return { outcome: 'enqueued', id: String(id) };
    });
  }

  async add(
    definition: ScheduleDefinition,
    settings: RunTimeScheduleSettings,
    now: Date,
  ): Promise<ScheduleRecord | null> {
    const at = now.toISOString();
    const result = await this.#connection.query<ScheduleRow>(
      this.#sql.add,
      runTimeScheduleValues(definition, settings, at),
    );
    const row = result.rows[0];
    return row === undefined ? null : toSchedule(row);
  }

  async remove(name: string): Promise<boolean> {
    const result = await this.#connection.query(this.#sql.remove, [name]);
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
         created_at, updated_at, schedule_name, schedule_tick, priority, ordering_key, flow_key)
       VALUES ($1, $2, $3::json, $4, COALESCE($5::timestamptz, ${NOW}), $6, $7::json, ${NOW}, ${NOW},
         $10, $11::timestamptz, $8::smallint, $9, ${flowKeyOf(n, '$1::text', '$3::json')})
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
    paused: row.paused === 't',
    lastTick: row.last_tick_ms === null ? null : new Date(Number(row.last_tick_ms)),
    activeFrom: new Date(Number(row.active_from_ms)),
    runTime: decodeRunTimeSettings(row.run_time_settings),
  };
}
