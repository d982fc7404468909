import type { SqlSession } from '../db/sql.js';
import type { OperationView } from '../domain/operation-view.js';
import { httpJson, type HttpAnswer } from '../load/http-client.js';
import { sleep } from '../stats.js';

/** GET /operations/:id until `done` holds for the view, or `timeoutMs` passes (then the last view). */
export async function pollOperation(
  baseUrl: string,
  operationId: string,
  done: (v: OperationView) => boolean,
  timeoutMs = 20_000,
): Promise<OperationView> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await httpJson(`${baseUrl}/operations/${operationId}`, 'GET');
    const view = answer.body as OperationView;
    if (answer.status === 200 && done(view)) return view;
    if (Date.now() > deadline) return view;
    await sleep(50);
  }
}

/** GET /admin/commands/:id until its status is one of `statuses`, or `timeoutMs` passes. */
export async function pollCommand(
  baseUrl: string,
  commandId: string,
  statuses: readonly string[],
  timeoutMs = 20_000,
): Promise<{ status: string; [k: string]: unknown }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const body = (await httpJson(`${baseUrl}/admin/commands/${commandId}`, 'GET')).body as { status: string };
    if (statuses.includes(body.status) || Date.now() > deadline) return body;
    await sleep(25);
  }
}

/**
 * GET /health until it answers `status`, or `timeoutMs` passes (then the last answer): the admin
 * handler serves one cached answer per second, so a change shows within about that.
 */
export async function pollHealth(baseUrl: string, status: number, timeoutMs = 5_000): Promise<HttpAnswer> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await httpJson(`${baseUrl}/health`, 'GET');
    if (answer.status === status || Date.now() > deadline) return answer;
    await sleep(50);
  }
}

/** The reasons' messages of a /health answer, joined. */
export function healthReasons(answer: HttpAnswer): string {
  const reasons = (answer.body as { reasons?: { message: string }[] } | null)?.reasons ?? [];
  return reasons.map((r) => r.message).join('; ');
}

export function errorMessage(answer: HttpAnswer): string {
  const body = answer.body as { error?: { message?: string } | string; message?: string } | null;
  if (typeof body?.error === 'object' && body.error?.message) return body.error.message;
  return body?.message ?? `HTTP ${answer.status}`;
}

/**
 * Every command row, finished or not, as a FROM source with the columns the checks read: on
 * PostgreSQL and SQLite a finished command moves from `async_command` to `async_command_history`.
 */
export async function allCommandRows(db: SqlSession): Promise<string> {
  const columns = 'type, status, biz_key, rescue_count';
  const hasHistory = await db.all('SELECT 1 FROM async_command_history WHERE 1 = 0').then(
    () => true,
    () => false,
  );
  return hasHistory
    ? `(SELECT ${columns} FROM async_command UNION ALL SELECT ${columns} FROM async_command_history) AS c`
    : 'async_command';
}

export async function commandCountsByStatus(db: SqlSession): Promise<Record<string, number>> {
  const rows = await db.all<{ status: string; n: number | string }>(
    `SELECT status, COUNT(*) AS n FROM ${await allCommandRows(db)} GROUP BY status ORDER BY status`,
  );
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}

/** `SELECT COUNT(*) AS n …` as a number (pg and mysql2 hand BIGINT counts back as strings). */
export async function countOf(db: SqlSession, sql: string, params: readonly unknown[] = []): Promise<number> {
  const [row] = await db.all<{ n: number | string }>(sql, params);
  return Number(row?.n ?? 0);
}

export function formatCounts(counts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(counts);
  return entries.length === 0 ? 'none' : entries.map(([k, n]) => `${k} ${n}`).join(', ');
}
