import Database from 'better-sqlite3';
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

/** Reads the demo's SQLite file from outside the server (after a crash, or to count rows). */
export function readDatabase<T>(file: string, fn: (db: Database.Database) => T): T {
  const db = new Database(file);
  try {
    db.pragma('busy_timeout = 5000');
    return fn(db);
  } finally {
    db.close();
  }
}

export function commandCountsByStatus(db: Database.Database): Record<string, number> {
  const rows = db
    .prepare('SELECT status, COUNT(*) AS n FROM async_command GROUP BY status ORDER BY status')
    .all() as {
    status: string;
    n: number;
  }[];
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

export function formatCounts(counts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(counts);
  return entries.length === 0 ? 'none' : entries.map(([k, n]) => `${k} ${n}`).join(', ');
}
