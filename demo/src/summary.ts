import type { LoadRun } from './load/run-load.js';
import { formatMs, percentiles } from './stats.js';

export interface LoadSummary {
  readonly requests: number;
  readonly answers: Record<string, number>;
  readonly accepted: number;
  readonly completed: number;
  readonly rejected: number;
  readonly followUpFailed: number;
  readonly stillPending: number;
  /** Failed attempts that asynccmd retried (over all commands). */
  readonly retried: number;
  /** Commands that are dead letters now. */
  readonly dead: number;
  readonly responseMs: ReturnType<typeof percentiles>;
  readonly acceptToTerminalMs: ReturnType<typeof percentiles>;
}

export function summarise(run: LoadRun): LoadSummary {
  const answers: Record<string, number> = {};
  for (const s of run.sent) {
    const key = s.status === 0 ? 'no answer' : String(s.status);
    answers[key] = (answers[key] ?? 0) + 1;
  }
  const ops = [...run.tracker.operations.values()];
  const count = (state: string) => ops.filter((o) => o.state === state).length;
  return {
    requests: run.sent.length,
    answers,
    accepted: ops.length,
    completed: count('completed'),
    rejected: count('rejected'),
    followUpFailed: count('follow_up_failed'),
    stillPending: run.tracker.unfinished().length,
    retried: ops.reduce((n, o) => n + o.retries, 0),
    dead: ops.reduce((n, o) => n + o.deadCommands, 0),
    responseMs: percentiles(run.sent.map((s) => s.latencyMs)),
    acceptToTerminalMs: percentiles(run.tracker.acceptToTerminalMs()),
  };
}

export function formatSummary(s: LoadSummary): string {
  const answers = Object.entries(s.answers)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, n]) => `${status}: ${n}`)
    .join(' · ');
  return [
    `  requests          ${s.requests} POST /orders   (${answers})`,
    `  response time     p50 ${formatMs(s.responseMs.p50)} · p99 ${formatMs(s.responseMs.p99)}`,
    `  accepted          ${s.accepted} operations (201 Created: order confirmed; 202 Accepted: awaiting the supplier)`,
    `  completed         ${s.completed}` +
      (s.rejected ? `   · rejected by the supplier after acceptance: ${s.rejected}` : '') +
      (s.stillPending ? `   · still pending: ${s.stillPending}` : ''),
    `  retried           ${s.retried} failed attempts retried by asynccmd (simulated downstream failures)`,
    `  dead              ${s.dead} dead letter(s)` +
      (s.dead ? ` in ${s.followUpFailed} operation(s): health is DOWN until someone retries them` : ''),
    `  accept→terminal   p50 ${formatMs(s.acceptToTerminalMs.p50)} · p99 ${formatMs(s.acceptToTerminalMs.p99)}`,
  ].join('\n');
}
